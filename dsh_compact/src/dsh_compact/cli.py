"""Manual compaction from the command line (`dsh compact SESSION_ID`) and the UI (`/compact`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dsh_compact.errors import CompactionError
from dsh_host import ConfigError, display_inline_text

if TYPE_CHECKING:
    from dsh_compact.service import CompactionService
    from dsh_compact.transaction import CompactionResult
    from dsh_host import Host
    from dsh_host.ui import SlashCommandUI


def describe(session_id: str, result: CompactionResult | None) -> str:
    """The one line reporting a manual compaction."""
    if result is None:
        return f"session {session_id}: nothing to compact"
    start, end = result.shadowed_range
    return (
        f"session {session_id}: compacted {len(result.shadowed_seqs)} surface nodes "
        f"(seqs {start}-{end}, ~{result.shadowed_token_count} tokens) "
        f"into checkpoint #{result.checkpoint_seq}"
    )


@click.command("compact")
@click.argument("session_id")
@click.option(
    "--retain-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Keep at least this many tokens of recent history (default: the configured retain budget).",
)
@click.pass_obj
def compact_command(host: Host, session_id: str, retain_tokens: int | None) -> None:
    """Compact a stored session now: its older history becomes one checkpoint."""
    import asyncio

    click.echo(asyncio.run(_compact_stored(host, session_id, retain_tokens)))


async def _compact_stored(host: Host, session_id: str, retain_tokens: int | None) -> str:
    service: CompactionService = host.services.compact
    session = await host.sessions.resume(session_id)
    try:
        result = await service.compact_now(session, retain_tokens=retain_tokens)
    finally:
        await host.sessions.flush(session)
    # The id is untrusted text on its way to a terminal (the chat UI escapes its notices itself).
    return describe(display_inline_text(session_id), result)


async def compact_slash_command(ui: SlashCommandUI, argument: str) -> str:
    """`/compact [RETAIN_TOKENS]`: compact the UI's session now; returns the line to show."""
    argument = argument.strip()
    if argument and not (argument.isascii() and argument.isdigit()):
        raise ConfigError(f"/compact takes an optional number of tokens to keep, got {argument!r}")
    agent = ui.agent
    # Compacting under a running turn would race the loop; the loop relieves pressure itself.
    if agent.status == "running":
        raise CompactionError("the agent is busy: run /compact when the turn has ended")
    service: CompactionService = agent.host.services.compact
    result = await service.compact_now(agent, retain_tokens=int(argument) if argument else None)
    return describe(agent.session.id, result)
