"""The log invariants of the compaction bracket (`compact/start`, `compact/summary`, `compact/end`).

A compaction opens with `compact/start`, records at most one `compact/summary`, and closes with
`compact/end` naming the same turn; a successful end (no `error`) needs its summary. The summary's
`shadowedRange` names the first and last of its non-empty `shadowedSeqs`, and its token count is
a non-negative safe integer. The messages are the reference's.

A crash between start and end leaves an orphan `compact/start`, which crash repair closes with
its turn; the orphan is inert (no replacement landed). So an `interrupted` turn end (crash
repair's) releases the open compaction, and the orphan never makes a later one a violation. Any
other open compaction stays open, as in the reference.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.log import Violation
from dsh_host.text import js_string

if TYPE_CHECKING:
    from dsh_host import Event, SessionHeader
    from dsh_host.hookspecs import Json, JsonValue

RULE = "compact"
_MAX_SAFE_INTEGER = 2**53 - 1


@dataclass
class _Open:
    turn: JsonValue
    summarized: bool = False


def check_compactions(header: SessionHeader, events: Sequence[Event]) -> Iterator[Violation]:
    """A `dsh_host.log.LogInvariant`: every violation of the compaction bracket in a log."""
    open_: _Open | None = None
    for event in events:
        kind = event.type
        if kind == "turn/end" and _interrupted(event):
            open_ = None
            continue
        if not kind.startswith("compact/"):
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        seq = event.seq
        turn = js_string(data.get("turn"))
        if kind == "compact/start":
            if open_ is not None:
                yield Violation(
                    seq, RULE, f"compact/start for turn {turn} while turn {js_string(open_.turn)} is still compacting"
                )
            open_ = _Open(data.get("turn"))
        elif kind == "compact/summary":
            if open_ is None:
                yield Violation(seq, RULE, "compact/summary has no matching compact/start")
            elif open_.summarized:
                yield Violation(seq, RULE, "compact/summary repeated within one compaction")
            yield from _summary_fields(seq, data)
            if open_ is not None:
                open_.summarized = True
        elif kind == "compact/end":
            if open_ is None:
                yield Violation(seq, RULE, "compact/end has no matching compact/start")
                continue
            if not _strictly_equal(data.get("turn"), open_.turn):
                yield Violation(
                    seq, RULE, f"compact/end turn {turn} does not match compact/start turn {js_string(open_.turn)}"
                )
            if "error" not in data and not open_.summarized:
                yield Violation(seq, RULE, "successful compact/end requires one compact/summary")
            open_ = None


def _summary_fields(seq: int, data: Json) -> Iterator[Violation]:
    seqs = data.get("shadowedSeqs")
    if not isinstance(seqs, list) or not seqs:
        yield Violation(seq, RULE, "compact/summary shadowedSeqs must be non-empty")
    else:
        shadowed_range = data.get("shadowedRange")
        start = shadowed_range.get("start") if isinstance(shadowed_range, Mapping) else None
        end = shadowed_range.get("end") if isinstance(shadowed_range, Mapping) else None
        if not _strictly_equal(seqs[0], start) or not _strictly_equal(seqs[-1], end):
            yield Violation(seq, RULE, "compact/summary shadowedRange must match the first and last shadowedSeqs")
    count = data.get("shadowedTokenCount")
    if type(count) is not int or not 0 <= count <= _MAX_SAFE_INTEGER:
        yield Violation(seq, RULE, "compact/summary shadowedTokenCount must be a non-negative safe integer")


def _strictly_equal(a: JsonValue, b: JsonValue) -> bool:
    # JavaScript's `===` on JSON scalars: `true` is not `1`.
    return type(a) is type(b) and a == b


def _interrupted(event: Event) -> bool:
    reason = event.data.get("reason") if isinstance(event.data, Mapping) else None
    return isinstance(reason, Mapping) and reason.get("kind") == "interrupted"
