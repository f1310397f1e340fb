"""`dsh run PROMPT`: one headless turn, streamed to stdout, persisted."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from dsh_host.errors import DshError
from dsh_host.host import Host
from dsh_host.session.events import Event
from dsh_host.session.session import Session
from dsh_host.tui.terminal_text import display_inline_text, display_text, inert_json

if TYPE_CHECKING:
    from dsh_host.agent import Agent


class PreparationFailed(DshError):
    """A session reference in the prompt could not be prepared; nothing was sent."""


class TurnFailed(DshError):
    """The turn ended with an error; it is in `session`'s log (which was persisted)."""

    def __init__(self, message: str, session: Session) -> None:
        super().__init__(message)
        self.session = session


def start_agent(host: Host, session: Session, *, model_spec: str | None = None, announce: bool = True) -> Agent:
    """An agent on `session` with the configured model; prints the keyless notice once."""
    from dsh_host.agent import Agent

    resolved = host.models.resolve(model_spec)
    if announce:
        notice = resolved.notice
        if notice is None and resolved.provider == "scripted":
            notice = 'the scripted model answers (keyless); set [host] model = "openai:deepseek-chat" for a real one'
        if notice:
            click.echo(f"dsh: {notice}", err=True)
    return Agent.create(host, session, resolved)


async def prepare_message(host: Host, agent: Agent, text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Content and contexts for `text`: mentions are prepared only where session-reference is mounted."""
    service = host.services.get("session_references")
    if service is None:
        return [{"type": "text", "text": text}], []
    try:
        parsed = service.parse_text(text)
        if not parsed.references:
            return [{"type": "text", "text": parsed.text}], []
        prepared = await service.prepare(agent, [{"type": "text", "text": parsed.text}], parsed.references)
    except Exception as exc:  # noqa: BLE001 - any preparation failure aborts the send
        code = getattr(exc, "code", None)
        message = service.describe_error(exc)
        raise PreparationFailed(f"{message} ({code})" if code else message) from None
    return prepared.content, prepared.contexts


async def run_turn(host: Host, text: str, *, session_id: str | None, as_json: bool, echo: Any) -> Session:
    """Run one turn of `text` in a new (or resumed) session, echoing text deltas or events."""
    if session_id is None:
        session = host.sessions.create(os.getcwd())
    else:
        session = await host.sessions.resume(session_id)
    start = session.seq

    def on_event(_: Session, event: Event) -> None:
        # Model text is untrusted: it reaches the terminal with its control characters inert.
        if as_json:
            echo(inert_json(event.to_line()) + "\n")
        elif event.type == "assistant/chunk" and event.data["chunk"].get("type") == "text-delta":
            echo(display_text(event.data["chunk"]["text"]))

    agent = start_agent(host, session)
    unsubscribe = session.subscribe(on_event)
    try:
        content, contexts = await prepare_message(host, agent, text)
        agent.send(content, contexts=contexts)
        await agent.wait_idle()
    finally:
        unsubscribe()
        await agent.dispose()
        await host.sessions.flush(session)
    end = next((e for e in reversed(session.events[start:]) if e.type == "turn/end"), None)
    if not as_json:
        echo("\n")
    # A failed turn fails the command in both modes (with --json the events also say why).
    if end is not None and end.data["reason"]["kind"] == "error":
        reason = end.data["reason"]
        message = reason.get("failure", {}).get("message") or reason.get("message", "error")
        raise TurnFailed(f"turn failed: {message}", session)
    return session


@click.command()
@click.argument("prompt")
@click.option("--session", "session_id", default=None, help="Continue this session instead of starting one.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn's events as JSON lines.")
@click.pass_obj
def run(host: Host, prompt: str, session_id: str | None, as_json: bool) -> None:
    """Run one headless turn of PROMPT and stream the reply."""

    def echo(text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader went away (`dsh run ... | head`): keep running the turn quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())

    try:
        session = asyncio.run(run_turn(host, prompt, session_id=session_id, as_json=as_json, echo=echo))
    except TurnFailed as exc:
        # The failed turn was persisted: name its session before the error line.
        click.echo(f"session: {display_inline_text(exc.session.id)}", err=True)
        raise
    # On stderr in both modes: the events on stdout do not name their session.
    click.echo(f"session: {display_inline_text(session.id)}", err=True)
