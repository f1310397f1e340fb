"""Log invariants: a pure check of a whole session log, reporting everything it finds.

`check_log(header, events)` folds the log once per rule family and returns its findings, each
with the seq of the event it is about (None for the header) and the rule's name. A finding is
either a `Violation` (the log breaks a rule: no writer that follows the log format could have
written it) or a `Note` (the log breaks no rule and loads and reads fine, but something about it
is worth knowing, such as a shape that cannot be resumed):

- `seq`: seqs are contiguous from 0.
- `surface`: the surface fold of docs/log-format.md (markers, replace ranges,
  provenance, tool-result rewrites). An event that fails it is folded as if it were log-only,
  so later events are checked against the surface the log really has.
- `shape`: no legacy vocabulary (`request/header-delta`, `mode/set`, a `request/header` with
  reason `fallback`).
- `seed-shape` (notes): the shapes of logs written before models were routed by provider. A
  `request/header` config or an `assistant/message` provenance without a non-empty provider and
  model, or an `aborted` turn end carrying more than its kind: such a log reads fine, but
  resuming or forking it is not supported.
- `turn-nesting`, `step-scope`, `tool-pairing`, `turn-enclosure`: turns are consecutive from 1
  and never overlap, steps likewise within a turn; chunks, assistant messages, tool calls and
  appended tool results name the open turn and step; an appended `tool/result` answers a
  `tool/call` of its step (unless it is the synthetic `TOOL_NOT_STARTED` result of crash
  repair); a content-rewrite `tool/result` only needs an open turn; every other event lies
  inside an open turn.
- `fork-seed`: a forked session's seed (`seedLength` events) ends at a `turn/end`, so a fork
  starts from whole turns.
- `transcript-copy` (a note): a dsh copy of another agent's session (`dsh sessions import` of a
  session source's export: a parent session, then only appended messages and, last, titles)
  has no turns; instead of the turn rules it gets this note, and resuming it is not supported.

Plugins own the rules of their own event types: they contribute `LogInvariant`s through the
`dsh_log_invariants` hook, and `check_log` runs them after the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.session.events import SURFACE_TYPES, Event, SessionHeader
from dsh_host.session.surface import Surface, SurfaceError, plan_transition
from dsh_host.text import js_string

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
SEED_SHAPE = "seed-shape"
TRANSCRIPT_COPY = "transcript-copy"

_PRE_PROVIDER = " (a shape from before provider routing: resuming or forking this log is not supported)"
_STEP_SCOPED = frozenset({"assistant/chunk", "assistant/message", "tool/call"})
_TURN_BOUNDARIES = frozenset({"turn/start", "turn/end", "step/start", "step/end", "tool/result"})
_COPIED_MESSAGES = frozenset({"user/message", "assistant/message"})
_COPY_REFUSAL = "its messages are in no turn (a copy of another agent's session); resuming it is not supported"


@dataclass(frozen=True, slots=True)
class _Finding:
    seq: int | None
    rule: str
    message: str


class Violation(_Finding):
    """A broken log rule: the event's `seq` (None for the header), the `rule`, and what broke.

    A log with a violation is not one a writer following the log format could have written;
    `dsh sessions check` exits 1 on it.
    """

    __slots__ = ()


class Note(_Finding):
    """Something worth knowing about a log that breaks no rule: `seq`, `rule`, and what it is.

    The log loads and reads fine, but e.g. cannot be resumed. `dsh sessions check` lists notes
    and still exits 0 (unless `--strict`). A `Note` never equals a `Violation` with the same fields.
    """

    __slots__ = ()


Finding = Violation | Note
"""What the log check reports at one place in a log: a `Violation` or a `Note`."""

LogInvariant = Callable[[SessionHeader, Sequence[Event]], Iterable[Finding]]
"""A rule family over a whole log: `invariant(header, events)` yields a `Violation` for each
broken rule and a `Note` for each thing worth knowing about a log that breaks none."""


def check_log(
    header: SessionHeader, events: Sequence[Event], invariants: Iterable[LogInvariant] = ()
) -> tuple[Finding, ...]:
    """Every finding of the built-in rules and of `invariants`, ordered by seq (header first).

    Violations and notes come in one tuple; the log is valid when none of them is a `Violation`.
    """
    found: list[Finding] = []
    for invariant in (*BUILTIN_INVARIANTS, *invariants):
        found.extend(invariant(header, events))
    return tuple(sorted(found, key=lambda f: -1 if f.seq is None else f.seq))


def data_field(event: Event, key: str) -> JsonValue:
    """`event.data[key]`, or None when the data is not an object or lacks the key."""
    data = event.data
    return data.get(key) if isinstance(data, Mapping) else None


def check_seqs(header: SessionHeader, events: Sequence[Event]) -> Iterator[Violation]:
    """`seq`: each event's seq is its index in the log."""
    for index, event in enumerate(events):
        if event.seq != index:
            yield Violation(event.seq, "seq", f"session event seq {event.seq} is not contiguous; expected {index}")


def check_surface(header: SessionHeader, events: Sequence[Event]) -> Iterator[Violation]:
    """`surface`: the surface fold accepts every event."""
    surface = Surface()
    folded: dict[int, Event] = {}
    for event in events:
        if event.surface_op is None and event.source_event_seqs is None and event.type not in SURFACE_TYPES:
            continue  # a plain log-only event (most of a log): nothing to fold
        try:
            transition = plan_transition(event, surface.nodes, folded.__getitem__)
        except SurfaceError as exc:
            yield Violation(event.seq, "surface", str(exc))
            continue
        folded[event.seq] = event
        surface.apply(transition)


def check_shapes(header: SessionHeader, events: Sequence[Event]) -> Iterator[Finding]:
    """`shape`: no legacy vocabulary (violations); `seed-shape`: no shape from before provider
    routing (notes: such a log reads fine, it only cannot be resumed or forked)."""
    for event in events:
        kind = event.type
        if kind in ("request/header-delta", "mode/set"):
            yield Violation(event.seq, "shape", f"legacy event type {kind!r} is not supported")
        elif kind == "request/header":
            if data_field(event, "reason") == "fallback":
                yield Violation(event.seq, "shape", "legacy request/header reason 'fallback' is not supported")
            header_data = data_field(event, "header")
            config = header_data.get("config") if isinstance(header_data, Mapping) else None
            if not _routed(config):
                yield Note(
                    event.seq, SEED_SHAPE, f"request/header config lacks a non-empty provider/model{_PRE_PROVIDER}"
                )
        elif kind == "assistant/message":
            if not _routed(data_field(event, "provenance")):
                yield Note(
                    event.seq,
                    SEED_SHAPE,
                    f"assistant/message provenance lacks a non-empty provider/model{_PRE_PROVIDER}",
                )
        elif kind == "turn/end":
            reason = data_field(event, "reason")
            if isinstance(reason, Mapping) and reason.get("kind") == "aborted" and set(reason) != {"kind"}:
                yield Note(
                    event.seq, SEED_SHAPE, f"turn/end reason 'aborted' carries more than its kind{_PRE_PROVIDER}"
                )


def resume_refusal(header: SessionHeader, events: Sequence[Event]) -> str | None:
    """Why a log cannot be resumed (a transcript copy, or the first `seed-shape` note), or None when it can be."""
    if is_transcript_copy(header, events):
        return _COPY_REFUSAL
    return next((f.message for f in check_shapes(header, events) if f.rule == SEED_SHAPE), None)


def is_transcript_copy(header: SessionHeader, events: Sequence[Event]) -> bool:
    """Whether the log is a dsh copy of another agent's session, as `dsh sessions import` makes one.

    Such a copy names the original as its parent (and is no fork: no seed) and holds what a
    session source synthesizes, appended messages only, followed by the titles dsh gave it.
    """
    if header.parent_session is None or header.seed_length or not events:
        return False
    messages = 0
    for event in events:
        if event.type not in _COPIED_MESSAGES or event.surface_op != "append":
            break
        messages += 1
    return messages > 0 and all(event.type == "session/title" for event in events[messages:])


def _routed(config: JsonValue) -> bool:
    if not isinstance(config, Mapping):
        return False
    provider, model = config.get("provider"), config.get("model")
    return isinstance(provider, str) and bool(provider) and isinstance(model, str) and bool(model)


def check_turns(header: SessionHeader, events: Sequence[Event]) -> Iterator[Finding]:
    """`turn-nesting`, `step-scope`, `tool-pairing` and `turn-enclosure` (the nesting companion).

    A transcript copy has no turns to check: it gets one `transcript-copy` note instead.
    """
    if is_transcript_copy(header, events):
        parent = js_string(header.parent_session)
        yield Note(
            None, TRANSCRIPT_COPY, f"a copy of session {parent}: its messages are in no turn, so it cannot be resumed"
        )
        return
    open_turn: JsonValue = None
    open_step: JsonValue = None
    next_turn, next_step = 1, 1
    pending_calls: set[JsonValue] = set()
    for event in events:
        kind, seq = event.type, event.seq
        if kind not in _STEP_SCOPED and kind not in _TURN_BOUNDARIES:
            if open_turn is None:
                yield Violation(
                    seq,
                    "turn-enclosure",
                    f"{kind} appended outside any open turn (every event must be turn-enclosed)",
                )
            continue
        turn, step = data_field(event, "turn"), data_field(event, "step")
        if kind == "turn/start":
            if open_turn is not None:
                yield Violation(
                    seq, "turn-nesting", f"turn/start {js_string(turn)} while turn {js_string(open_turn)} is still open"
                )
            if not _same(turn, next_turn):
                yield Violation(
                    seq, "turn-nesting", f"turn/start expected turn {js_string(next_turn)}, got {js_string(turn)}"
                )
            open_turn, next_step = turn, 1
        elif kind == "turn/end":
            if open_turn is None or not _same(turn, open_turn):
                yield Violation(
                    seq, "turn-nesting", f"turn/end {js_string(turn)} does not match open turn {js_string(open_turn)}"
                )
            if open_step is not None:
                yield Violation(
                    seq, "turn-nesting", f"turn/end {js_string(turn)} while step {js_string(open_step)} is still open"
                )
            open_turn = None
            next_turn += 1
        elif kind == "step/start":
            if open_turn is None or not _same(turn, open_turn):
                yield Violation(
                    seq, "turn-nesting", f"step/start in turn {js_string(turn)} but open turn is {js_string(open_turn)}"
                )
            if open_step is not None:
                yield Violation(
                    seq, "turn-nesting", f"step/start {js_string(step)} while step {js_string(open_step)} is still open"
                )
            if not _same(step, next_step):
                yield Violation(
                    seq,
                    "turn-nesting",
                    f"step/start expected step {js_string(next_step)} in turn {js_string(turn)}, got {js_string(step)}",
                )
            open_step = step
        elif kind == "step/end":
            yield from _open_step(event, turn, step, open_turn, open_step)
            pending_calls.clear()
            open_step = None
            next_step += 1
        elif kind == "tool/result" and event.surface_op != "append":
            # A content rewrite (a prune) is turn work that cites the result it replaces; it is
            # not a second execution of the call.
            if open_turn is None:
                yield Violation(seq, "turn-enclosure", "tool/result surface replacement appended outside any open turn")
        elif kind == "tool/result":
            yield from _open_step(event, turn, step, open_turn, open_step)
            call_id = data_field(event, "callId")
            error = data_field(event, "error")
            not_started = data_field(event, "isError") is True and (
                isinstance(error, Mapping) and error.get("code") == TOOL_NOT_STARTED
            )
            if _hashable(call_id) not in pending_calls and not not_started:
                yield Violation(seq, "tool-pairing", f"tool/result for {call_id} with no prior tool/call in this step")
            pending_calls.discard(_hashable(call_id))
        else:
            yield from _open_step(event, turn, step, open_turn, open_step)
            if kind == "tool/call":
                pending_calls.add(_hashable(data_field(event, "callId")))


def _open_step(
    event: Event, turn: JsonValue, step: JsonValue, open_turn: JsonValue, open_step: JsonValue
) -> Iterator[Violation]:
    if open_turn is None or open_step is None or not _same(turn, open_turn) or not _same(step, open_step):
        yield Violation(
            event.seq,
            "step-scope",
            f"{event.type} names turn {js_string(turn)}/step {js_string(step)} "
            f"but open is turn {js_string(open_turn)}/step {js_string(open_step)}",
        )


def _hashable(value: JsonValue) -> JsonValue:
    # A call id is a string in every log this host writes; anything else is compared by its text.
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _same(a: JsonValue, b: JsonValue) -> bool:
    """JavaScript's `===` on JSON scalars: `true` is not `1`."""
    return type(a) is type(b) and a == b


def check_fork_seed(header: SessionHeader, events: Sequence[Event]) -> Iterator[Violation]:
    """`fork-seed`: a fork's seed is a whole number of closed turns of its log."""
    length = header.seed_length
    if not length:
        return
    if length > len(events):
        yield Violation(None, "fork-seed", f"seedLength {length} exceeds the log's {len(events)} events")
    elif events[length - 1].type != "turn/end":
        last = events[length - 1]
        yield Violation(last.seq, "fork-seed", f"the fork seed must end at turn/end, got {last.type}")


BUILTIN_INVARIANTS: tuple[LogInvariant, ...] = (check_seqs, check_surface, check_shapes, check_turns, check_fork_seed)
"""The rules every log is checked against, whatever the plugins."""
