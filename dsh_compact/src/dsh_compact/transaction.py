"""The compaction transaction: replace a run of surface nodes with a summary checkpoint.

Everything that can be checked without the summary is checked before anything is written, so a
refused compaction leaves no trace. Past that point the log brackets the work:

    compact/start {turn}            takes the lock
    compact/summary {...}           the raw summary and what it shadows (log-only)
    user/message (checkpoint)       the one surface mutation: replace start..end
    compact/end {turn}              releases the lock, after the mutation landed

and a failure after `compact/start` writes `compact/end {turn, error}` and re-raises. The lock
is read from the log itself (`inspect_turn_tail`), only back to the latest turn boundary, so a
`compact/start` orphaned by a crash in an earlier turn never blocks a later compaction.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_compact.errors import CompactionError
from dsh_compact.marker import COMPACT_CHECKPOINT_SOURCE
from dsh_compact.meter import TokenMeter
from dsh_compact.pairing import balanced_cuts
from dsh_compact.summarizer import Summarizer, build_summarization_input, frame
from dsh_compact.targets import CompactAgent
from dsh_host import Session

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json, JsonValue


@dataclass(frozen=True)
class TurnTail:
    """What the log says since the latest turn boundary: the open turn, and the lock state."""

    turn: int | None
    compacting: bool


@dataclass(frozen=True)
class CompactionResult:
    """A committed compaction: the seqs it wrote, the raw summary, and what it shadowed."""

    start_seq: int
    summary_seq: int
    checkpoint_seq: int
    end_seq: int
    summary: tuple[Json, ...]
    shadowed_range: tuple[int, int]
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int


def inspect_turn_tail(session: Session) -> TurnTail:
    """Scan back to the latest turn boundary; the first compact event met decides the lock."""
    compacting: bool | None = None
    for event in reversed(session.events):
        if compacting is None and event.type in ("compact/start", "compact/end"):
            compacting = event.type == "compact/start"
        elif event.type == "turn/start":
            return TurnTail(event.data["turn"], bool(compacting))
        elif event.type == "turn/end":
            return TurnTail(None, bool(compacting))
    return TurnTail(None, bool(compacting))


async def compact_region(
    agent: CompactAgent,
    start: int,
    end: int,
    *,
    meter: TokenMeter,
    summarizer: Summarizer,
    signal: asyncio.Event | None = None,
) -> CompactionResult:
    """Replace the surface run `start..end` (surface positions, inclusive) with a checkpoint.

    Raises `CompactionError` without writing anything when the range is not on the surface, is
    reversed, would split a tool-call/result pair, when no turn is open, or while another
    compaction is in progress. Once the lock is taken, the surface must not change and the turn
    must not end during summarization; a failure is logged in `compact/end` and re-raised.
    """
    session = agent.session
    nodes = session.surface.nodes
    if start not in nodes:
        raise CompactionError(f"compactRegion: start seq {start} not found in surface")
    if end not in nodes:
        raise CompactionError(f"compactRegion: end seq {end} not found in surface")
    first, last = nodes.index(start), nodes.index(end)
    if first > last:
        raise CompactionError(
            f"compactRegion: start seq {start} (position {first}) is after end seq {end} "
            f"(position {last}) on the surface"
        )
    balanced = balanced_cuts(session)
    if not balanced[first]:
        raise CompactionError(
            f"compactRegion: start seq {start} is not a balanced boundary (would split a step's tool-call/result pair)"
        )
    if not balanced[last + 1]:
        raise CompactionError(
            f"compactRegion: end seq {end} is not a balanced boundary (would split a step, or the step is still open)"
        )
    tail = inspect_turn_tail(session)
    if tail.compacting:
        raise CompactionError("compaction already in progress")
    if tail.turn is None:
        raise CompactionError("compactRegion: no open turn — compaction events must be enclosed in a turn")
    turn = tail.turn
    shadowed = tuple(nodes[first : last + 1])
    start_event = session.append("compact/start", {"turn": turn})
    try:
        locked = meter.measure(session)
        if tuple(node.seq for node in locked.nodes[first : last + 1]) != shadowed:
            raise CompactionError("compaction: selected surface changed before summarization began")
        shadowed_tokens = sum(node.tokens for node in locked.nodes[first : last + 1])
        summary = await summarizer.summarize(build_summarization_input(session, shadowed), agent, signal)
        if meter.measure(session).nodes != locked.nodes:
            raise CompactionError("compaction: session surface changed during summarization")
        # Log-only appends are fine, but the checkpoint must land in the turn that took the lock.
        if inspect_turn_tail(session) != TurnTail(turn, compacting=True):
            raise CompactionError(f"compaction: turn {turn} ended during summarization")
        framed = frame(summary.blocks)
        framed_tokens = meter.estimate_message({"role": "user", "content": framed})
        if framed_tokens >= shadowed_tokens:
            raise CompactionError(
                f"summary is not smaller than the shadowed content "
                f"({framed_tokens} estimated framed tokens >= {shadowed_tokens})"
            )
        summary_data: dict[str, JsonValue] = {
            "summary": [dict(block) for block in summary.blocks],
            "shadowedRange": {"start": start, "end": end},
            "shadowedSeqs": list(shadowed),
            "shadowedTokenCount": shadowed_tokens,
            "provider": summary.provider,
            "model": summary.model,
        }
        if summary.max_tokens is not None:
            summary_data["maxTokens"] = summary.max_tokens
        summary_event = session.append("compact/summary", summary_data)
        checkpoint = session.append(
            "user/message",
            {"content": framed, "source": dict(COMPACT_CHECKPOINT_SOURCE)},
            surface_op={"op": "replace", "start": start, "end": end},
            sources=[start_event.seq, summary_event.seq, *shadowed],
        )
        end_event = session.append("compact/end", {"turn": turn})
    except BaseException as exc:
        # Cancellation included: the lock must be released whatever stopped the compaction.
        session.append("compact/end", {"turn": turn, "error": str(exc) or type(exc).__name__})
        raise
    return CompactionResult(
        start_seq=start_event.seq,
        summary_seq=summary_event.seq,
        checkpoint_seq=checkpoint.seq,
        end_seq=end_event.seq,
        summary=summary.blocks,
        shadowed_range=(start, end),
        shadowed_seqs=shadowed,
        shadowed_token_count=shadowed_tokens,
    )
