"""Surface folding: the ordered list of event seqs that make up the model-visible history.

Five event types are surface events and must carry `surfaceOp`; every other type must carry
neither `surfaceOp` nor `sourceEventSeqs`. `"append"` adds the event at the end; a replace
`{"op": "replace", "start", "end"}` splices out the contiguous run of current nodes between the
positions of `start` and `end` (positions, not seq order) and puts the event in its place. A
transition is planned without touching state, and applied only once the plan succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh_host.errors import DshError
from dsh_host.session.events import NULL_MARKER, SURFACE_TYPES, Event, is_safe_int

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue


class SurfaceError(DshError, ValueError):
    """An event that would make the surface inconsistent."""


@dataclass(frozen=True, slots=True)
class Replacement:
    """One committed replace: the event's seq, its range, and the nodes it shadowed."""

    seq: int
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Transition:
    """What folding one event does: nothing (log-only), append, or replace `[lo, hi]` positions."""

    seq: int
    kind: str  # "log-only" | "append" | "replace"
    lo: int = -1
    hi: int = -1
    start: int = -1
    end: int = -1


def plan_transition(event: Event, nodes: Sequence[int], lookup: Callable[[int], Event]) -> Transition:
    """Validate `event` against the current `nodes`; raise SurfaceError, change nothing."""
    op, sources = event.surface_op, event.source_event_seqs
    if event.type not in SURFACE_TYPES:
        if op is not None:
            raise SurfaceError(f"session event {event.type!r} cannot carry surfaceOp")
        if sources is not None:
            raise SurfaceError(f"session event {event.type!r} cannot carry sourceEventSeqs")
        return Transition(event.seq, "log-only")
    if op is None:
        raise SurfaceError(f"session event {event.type!r} requires a surfaceOp marker")
    if op == "append":
        transition = Transition(event.seq, "append")
    elif isinstance(op, Mapping):
        if set(op) != {"op", "start", "end"} or op.get("op") != "replace":
            raise SurfaceError(f"invalid replace surfaceOp {dict(op)!r}")
        start, end = op["start"], op["end"]
        if not is_safe_int(start) or not is_safe_int(end):
            raise SurfaceError(
                f"invalid replace surfaceOp {dict(op)!r}: start and end must be non-negative safe integers"
            )
        lo = _position(nodes, start)
        if lo < 0:
            raise SurfaceError(f"surface replace: start seq {start} not found in surface")
        hi = _position(nodes, end)
        if hi < 0:
            raise SurfaceError(f"surface replace: end seq {end} not found in surface")
        if lo > hi:
            raise SurfaceError(f"surface replace: start seq {start} (index {lo}) is after end seq {end} (index {hi})")
        transition = Transition(event.seq, "replace", lo, hi, start, end)
    else:
        raise SurfaceError(f"invalid surfaceOp {op!r}")
    _check_sources(event, sources)
    if transition.kind == "replace":
        shadowed = nodes[transition.lo : transition.hi + 1]
        present = set(sources) if isinstance(sources, list) else set()
        missing = [s for s in shadowed if s not in present]
        if missing:
            raise SurfaceError(
                "surface replace: sourceEventSeqs must include every shadowed surface node; "
                f"missing {', '.join(map(str, missing))}"
            )
        if event.type == "tool/result":
            _check_tool_result_rewrite(event, shadowed, lookup)
    return transition


def _position(nodes: Sequence[int], seq: int) -> int:
    try:
        return nodes.index(seq)
    except ValueError:
        return -1


_INT = frozenset({int})


def _check_sources(event: Event, sources: JsonValue) -> None:
    if sources is None:
        return
    if sources is NULL_MARKER or not isinstance(sources, list):
        raise SurfaceError(f"session event {event.seq} sourceEventSeqs must be an array")
    if not sources and event.type != "assistant/message":
        raise SurfaceError(f"session event {event.seq} sourceEventSeqs must not be empty")
    # An assistant message lists every chunk of its step: check the valid case in C (ints, all
    # below this seq, so safe; none negative; no repeats), and walk only to name what is wrong.
    if (
        set(map(type, sources)) <= _INT
        and (not sources or (min(sources) >= 0 and max(sources) < event.seq))
        and len(set(sources)) == len(sources)
    ):
        return
    seen: set[int] = set()
    for value in sources:
        if not is_safe_int(value):
            raise SurfaceError(f"session event {event.seq} sourceEventSeqs must be non-negative safe integers")
        if value in seen:
            raise SurfaceError(f"session event {event.seq} sourceEventSeqs contains duplicates ({value})")
        if value >= event.seq:
            raise SurfaceError(f"session event {event.seq} sourceEventSeqs must reference earlier events ({value})")
        seen.add(value)


def _check_tool_result_rewrite(event: Event, shadowed: Sequence[int], lookup: Callable[[int], Event]) -> None:
    if len(shadowed) != 1:
        raise SurfaceError("tool/result replace must rewrite exactly one current node")
    original = lookup(shadowed[0])
    if original.type != "tool/result":
        raise SurfaceError("tool/result replace must target a current tool/result")
    new, old = event.data, original.data
    if not isinstance(new, Mapping) or not isinstance(old, Mapping):
        raise SurfaceError("tool/result replace may change only content")
    if set(new) - {"content"} != set(old) - {"content"} or any(
        not json_equal(new[k], old[k]) for k in new if k != "content"
    ):
        raise SurfaceError("tool/result replace may change only content")


def json_equal(a: JsonValue, b: JsonValue) -> bool:
    """Structural JSON equality: key order does not matter, but `true` is not `1` (unlike `==`)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
            if x is not y:
                return False
        elif isinstance(x, Mapping) and isinstance(y, Mapping):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, (Mapping, list)) or isinstance(y, (Mapping, list)) or x != y:
            return False
    return True


@dataclass
class Surface:
    """Current surface nodes and the number of committed replacements."""

    nodes: list[int] = field(default_factory=list)
    replace_generation: int = 0

    def apply(self, transition: Transition) -> tuple[int, ...]:
        """Commit a planned transition; returns the seqs a replace shadowed."""
        if transition.kind == "append":
            self.nodes.append(transition.seq)
            return ()
        if transition.kind == "replace":
            shadowed = tuple(self.nodes[transition.lo : transition.hi + 1])
            self.nodes[transition.lo : transition.hi + 1] = [transition.seq]
            self.replace_generation += 1
            return shadowed
        return ()


@dataclass(frozen=True)
class FoldResult:
    """The surface of a whole log, with every replacement in event order."""

    nodes: tuple[int, ...]
    replace_generation: int
    replacements: tuple[Replacement, ...]


def fold(events: Iterable[Event]) -> FoldResult:
    """Fold a whole log (contiguity included); raise SurfaceError at the first bad event."""
    log: list[Event] = []
    surface = Surface()
    replacements: list[Replacement] = []
    for index, event in enumerate(events):
        if event.seq != index:
            raise SurfaceError(f"session event seq {event.seq} is not contiguous; expected {index}")
        log.append(event)
        transition = plan_transition(event, surface.nodes, log.__getitem__)
        shadowed = surface.apply(transition)
        if transition.kind == "replace":
            replacements.append(Replacement(event.seq, transition.start, transition.end, shadowed))
    return FoldResult(tuple(surface.nodes), surface.replace_generation, tuple(replacements))


def classify(events: Sequence[Event]) -> dict[int, str]:
    """`current`, `shadowed` or `log-only` for each seq of a log (the query classification)."""
    result = fold(events)
    current = set(result.nodes)
    shadowed = {s for r in result.replacements for s in r.shadowed_seqs}
    return {e.seq: "current" if e.seq in current else "shadowed" if e.seq in shadowed else "log-only" for e in events}
