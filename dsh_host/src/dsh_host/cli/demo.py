"""`dsh demo`: the keyless end-to-end scenario of a cross-session reference.

A source session talks for a few turns on the scripted model and is compacted; a target
session's prompt mentions it; one turn runs. The demo prints the source's log and current
surface, the target's turn as the terminal UI renders it, and the exact model request the
target sent: the snapshot, the delimiter and the prompt in one user message.

The demo names no plugin: it mounts the standard features that are installed and asks the
host for the two services it needs by what they provide (a compaction service and a service
that writes session mentions), saying which is missing.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import click

from dsh_host.cli.sessions import describe_event
from dsh_host.errors import DshError
from dsh_host.terminal_text import display_inline_text, display_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from dsh_host.agent.agent import Agent
    from dsh_host.host import Host
    from dsh_host.jsontypes import JsonValue


class Compaction(Protocol):
    """What a compaction reports: the surface nodes it folded into its checkpoint."""

    @property
    def shadowed_seqs(self) -> Sequence[int]: ...


@runtime_checkable
class Compactor(Protocol):
    """A compaction service: folds a session's older history into one checkpoint, now."""

    async def compact_now(self, target: Agent, *, retain_tokens: int | None = None) -> Compaction | None: ...


@runtime_checkable
class SessionMentions(Protocol):
    """A session-reference service: writes the mention that brings a session into a message."""

    def format_mention(self, session_id: str, label: str | None = None) -> str: ...


REQUIRED: tuple[tuple[str, type], ...] = (
    ("a compaction service (compact_now)", Compactor),
    ("a session-reference service (format_mention)", SessionMentions),
)
"""What the demo needs, as (what to call it when missing, the protocol a service must provide)."""

SOURCE_TURNS = (
    "We are choosing a storage engine for the session log. Requirements: append-only writes, crash safety, "
    "reads of the current surface in time proportional to the surface, and listing sessions without reading logs.",
    "Decision: use SQLite in WAL mode, one file under the data dir, one transaction per flushed batch, and a "
    "materialised surface table so compacted history is never read back. Record that the schema version is 1.",
    "Open question: should titles live in the sessions table? Yes: keep the latest title there so listing "
    "10,000 sessions reads no log. Please remember these decisions for the next conversation.",
)
# The retained tail's budget: enough for the latest exchange (question and reply), not more.
DEMO_RETAIN_TOKENS = 90
TARGET_PROMPT = "Using {mention}, what did we decide about storage, and why?"


class DemoError(DshError):
    """The demo cannot run here (a feature it shows is not installed)."""


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the demo's sessions here (default: a new temporary directory).",
)
@click.pass_obj
def demo(host: Host, data_dir: Path | None) -> None:
    """Run the keyless cross-session reference scenario and print what happened."""
    # Imported here: registering the command (every dsh run) must not load the agent or the UI.
    import asyncio

    from rich.console import Console

    from dsh_host.config import DEFAULT_PLUGINS, load_config
    from dsh_host.host import Host
    from dsh_host.plugins import discover

    # Absolute, so the printed `DSH_HOME=...` works from any directory.
    data_dir = (data_dir or Path(tempfile.mkdtemp(prefix="dsh-demo-"))).absolute()
    # The standard features that are installed, whatever this host's configuration mounts (and
    # nothing else: the demo reads no other agent's sessions).
    installed = discover()
    standard = ",".join(name for name in DEFAULT_PLUGINS if name in installed)
    env = {"DSH_HOME": str(data_dir), "DSH_LOAD_PLUGINS": standard}
    demo_host = Host.start(load_config(env=env, cwd=Path(tempfile.gettempdir())))
    try:
        compactor, mentions = required_services(demo_host)
        asyncio.run(_scenario(demo_host, compactor, mentions, Console(highlight=False)))
    finally:
        demo_host.close()
    click.echo("")
    click.echo(f"The demo's sessions are stored in {data_dir}. Open them with:")
    click.echo(f"  DSH_HOME={data_dir} dsh sessions list")


def required_services(host: Host) -> list[Any]:
    """The services `REQUIRED` names, in order; a `DemoError` says which are missing."""
    found = [host.services.providing(capability) for _, capability in REQUIRED]
    missing = [what for (what, _), service in zip(REQUIRED, found, strict=True) if service is None]
    if missing:
        raise DemoError(
            f"dsh demo needs {' and '.join(missing)}, which no mounted plugin provides: install the plugins that do"
        )
    return found


async def _scenario(host: Host, compactor: Compactor, mentions: SessionMentions, console: Console) -> None:
    cwd = os.getcwd()
    agent = await host.open_agent(cwd=cwd, model="scripted")
    source = agent.session
    for text in SOURCE_TURNS:
        await agent.submit(text)
    await agent.dispose()
    # Keep only the latest exchange verbatim: everything older folds into the checkpoint.
    result = await compactor.compact_now(agent, retain_tokens=DEMO_RETAIN_TOKENS)
    await host.sessions.flush(source)
    _section(console, f"Source session {source.id}: its log ({source.seq} events)")
    for line in log_lines([json.loads(event.to_line()) for event in source.events]):
        console.print(line, markup=False, no_wrap=True, overflow="ellipsis")
    shadowed = len(result.shadowed_seqs) if result is not None else 0
    _section(console, f"Source surface after compaction ({shadowed} messages folded into a checkpoint)")
    snapshot = await host.services.session_query.read_surface(source.id)
    for event in snapshot.events:
        console.print(describe_event(event), markup=False, no_wrap=True, overflow="ellipsis")

    target_agent = await host.open_agent(cwd=cwd, model="scripted")
    target = target_agent.session
    prompt = TARGET_PROMPT.format(mention=mentions.format_mention(source.id, "storage decisions"))
    _section(console, f"Target session {target.id}: the user types")
    console.out(display_text(prompt), highlight=False)
    await target_agent.submit(prompt)
    await target_agent.close()

    from dsh_host.tui.render import Transcript

    _section(console, "The target's turn, as the terminal UI renders it")
    Transcript(host.hook).print(console, target.events)
    _section(console, "The exact model request the target sent (last message)")
    request = _last_request(target_agent)
    last = request["messages"][-1]
    for index, block in enumerate(last["content"]):
        console.print(f"[bold]block {index}[/bold] ({block['type']}):")
        # Byte for byte (only control characters escaped): never wrapped to the console's width.
        console.out(display_text(block.get("text", "")), highlight=False)


def log_lines(events: list[dict[str, JsonValue]]) -> list[str]:
    """One line per event, with each run of stream chunks folded into one line."""
    lines: list[str] = []
    run: list[dict[str, JsonValue]] = []

    def close_run() -> None:
        if run:
            text = "".join(e["data"]["chunk"].get("text", "") for e in run)
            first, last = run[0]["seq"], run[-1]["seq"]
            lines.append(f"{first:>6}..{last} assistant/chunk x{len(run)}  {display_inline_text(text)[:100]}")
            run.clear()

    for event in events:
        if event["type"] == "assistant/chunk":
            run.append(event)
            continue
        close_run()
        lines.append(describe_event(event))
    close_run()
    return lines


def _last_request(agent: Agent) -> dict[str, JsonValue]:
    from dsh_host.agent.reconstruct import rebuild_request

    step_start = max(e.seq for e in agent.session.events if e.type == "step/start")
    return rebuild_request(agent.session.events, step_start)


def _section(console: Console, title: str) -> None:
    console.print()
    console.rule(f"[bold]{title}[/bold]", align="left")
