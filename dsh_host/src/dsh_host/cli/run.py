"""`dsh run PROMPT`: one headless turn, streamed to stdout, persisted."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from dsh_host.errors import DshError
from dsh_host.terminal_text import display_inline_text, display_text, inert_json

if TYPE_CHECKING:
    from collections.abc import Callable

    from dsh_host.host import Host
    from dsh_host.session.events import Event
    from dsh_host.session.session import Session

KEYLESS_NOTICE = 'the scripted model answers (keyless); set [host] model = "openai:deepseek-chat" for a real one'


class PreparationFailed(DshError):
    """The text could not be composed into a message (a reference failed); nothing was sent."""


class TurnFailed(DshError):
    """The turn ended with an error; it is in `session`'s log (which was persisted)."""

    def __init__(self, message: str, session: Session) -> None:
        super().__init__(message)
        self.session = session


def announce_model(host: Host) -> None:
    """Say once on stderr when the configured model is the keyless one (a model that cannot run
    never gets here: opening the agent raised `ModelUnavailable`)."""
    if host.models.resolve().provider == "scripted":
        click.echo(f"dsh: {KEYLESS_NOTICE}", err=True)


async def run_turn(
    host: Host,
    text: str,
    *,
    session_id: str | None,
    as_json: bool,
    echo: Callable[[str], None],
    wait: float = 0.0,
) -> Session:
    """Run one turn of `text` in a new (or resumed) session, echoing text deltas or events.

    A session another dsh drives is refused at once (`SessionBusy`), or after queueing for its
    lease for up to `wait` seconds (saying so once on stderr). The model is announced once the
    session is open: a refusal is one line.
    """
    from dsh_host.agent.composition import ComposeError
    from dsh_host.store.base import SessionBusy

    try:
        agent = await host.open_agent(session_id)
    except SessionBusy as busy:
        if not wait:
            raise
        click.echo(f"dsh: {display_inline_text(str(busy))}; waiting up to {wait:g} s", err=True)
        agent = await host.open_agent(session_id, wait=wait)
    announce_model(host)
    session = agent.session

    def on_event(_: Session, event: Event) -> None:
        # Model text is untrusted: it reaches the terminal with its control characters inert.
        if as_json:
            echo(inert_json(event.to_line()) + "\n")
        elif event.type == "assistant/chunk" and event.data["chunk"].get("type") == "text-delta":
            echo(display_text(event.data["chunk"]["text"]))

    unsubscribe = session.subscribe(on_event)
    try:
        result = await agent.submit(text)
    except ComposeError as exc:
        raise PreparationFailed(f"{exc} ({exc.code})" if exc.code else str(exc)) from None
    finally:
        unsubscribe()
        await agent.close()
    if not as_json:
        echo("\n")
    # A failed turn fails the command in both modes (with --json the events also say why).
    if result.reason == "error":
        message = result.end.get("failure", {}).get("message") or result.end.get("message", "error")
        raise TurnFailed(f"turn failed: {message}", session)
    return session


@click.command()
@click.argument("prompt")
@click.option("--session", "session_id", default=None, help="Continue this session instead of starting one.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn's events as JSON lines.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0.0,
    metavar="SECONDS",
    help="When another dsh drives the session, wait up to SECONDS for it to finish instead of failing at once.",
)
@click.pass_obj
def run(host: Host, prompt: str, session_id: str | None, as_json: bool, wait: float) -> None:
    """Run one headless turn of PROMPT and stream the reply.

    A session another dsh is driving (the chat UI, another dsh run, dsh acp) is refused with one
    line and exit code 1, unless --wait queues behind it.
    """
    if wait and session_id is None:
        raise click.UsageError("--wait needs --session: only an existing session can be driven by another dsh")

    def echo(text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader went away (`dsh run ... | head`): keep running the turn quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())

    # Imported here: registering the command (every dsh run) must not load the agent loop.
    import asyncio

    try:
        session = asyncio.run(run_turn(host, prompt, session_id=session_id, as_json=as_json, echo=echo, wait=wait))
    except TurnFailed as exc:
        # The failed turn was persisted: name its session before the error line.
        click.echo(f"session: {display_inline_text(exc.session.id)}", err=True)
        raise
    # On stderr in both modes: the events on stdout do not name their session.
    click.echo(f"session: {display_inline_text(session.id)}", err=True)
