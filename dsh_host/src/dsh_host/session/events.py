"""The event envelope, the session header, and the vocabulary this host writes.

Events are immutable records. `data` is a frozen JSON value; `surface_op` is None (log-only
events), `"append"`, or a frozen `{"op": "replace", "start", "end"}` mapping exactly as read or
written; `source_event_seqs` is None or a frozen list. `to_json()` gives the log form with the
key order the reference writes: type, seq, time, data, sourceEventSeqs, surfaceOp.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple, TypeGuard

from dsh_host.errors import DshError
from dsh_host.session.frozen import frozen_loads, frozen_loads_compact
from dsh_host.session.lossless import FAST_DUMPS, FAST_LOADS, NotLosslessJson, canonical_text, standard_text

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from dsh_host.jsontypes import Json, JsonValue

SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result", "context/message", "steering/message"})
ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"})
MAX_SAFE_INTEGER = 2**53 - 1
SESSION_FORMAT_VERSION = 0

PROMPT_DELIMITER = "\n\n## My request:\n"
"""The text block that separates baked prompt-prefix contexts from the direct prompt."""


UNPARSED = object()
"""The `data` of an event built from its JSON text (`data_json`): parsed on first read."""


class InvalidEvent(DshError, ValueError):
    """An event or header that does not satisfy the envelope rules."""


def is_safe_int(value: object, *, minimum: int = 0) -> TypeGuard[int]:
    return type(value) is int and minimum <= value <= MAX_SAFE_INTEGER


def _read_only(name: str, doc: str) -> property:
    """A public, read-only view of the slot `_<name>` (the C `attrgetter` keeps reads cheap)."""

    def refuse(self: Event, value: object = None) -> None:
        raise FrozenInstanceError(f"session events are frozen (cannot change {name!r})")

    return property(attrgetter(f"_{name}"), refuse, refuse, doc)


class Event:
    """One logged event, immutable.

    The data is kept as its compact JSON text (`data_json`, what the store writes) and parsed
    into frozen containers the first time `data` is read: most events of a log (stream
    chunks) are written far more often than anyone reads their data.

    A log-only event appended by a live session is built with its whole log line (`line`, by
    `log_only_event`), which the store writes as it is; its `data_json` is then cut from the
    line when asked for.

    The fields are read-only properties over private slots rather than slots behind a
    refusing `__setattr__`: building an event is then plain slot stores, four times cheaper
    than `object.__setattr__` for each field, and appending is bound by it.
    """

    __slots__ = ("_data", "_data_json", "_line", "_seq", "_source_event_seqs", "_surface_op", "_time", "_type")

    def __init__(
        self,
        type: str,
        seq: int,
        time: int,
        data: JsonValue = UNPARSED,
        surface_op: JsonValue = None,
        source_event_seqs: JsonValue = None,
        data_json: str = "",
    ) -> None:
        if data is UNPARSED and not data_json:
            raise TypeError("Event needs data or data_json")
        self._type = type
        self._seq = seq
        self._time = time
        self._data = data
        self._surface_op = surface_op
        self._source_event_seqs = source_event_seqs
        self._data_json = data_json
        self._line = ""

    if TYPE_CHECKING:
        # What the fields read as; at run time they are the `_read_only` properties below.
        @property
        def type(self) -> str: ...
        @property
        def seq(self) -> int: ...
        @property
        def time(self) -> int: ...
        @property
        def surface_op(self) -> JsonValue: ...
        @property
        def source_event_seqs(self) -> JsonValue: ...
        @property
        def line(self) -> str: ...
    else:
        type = _read_only("type", "The event type, such as `assistant/chunk`.")
        seq = _read_only("seq", "The event's position in its log, from 0.")
        time = _read_only("time", "When the event was appended, in milliseconds since the epoch.")
        surface_op = _read_only("surface_op", 'None, "append", or the frozen replace mapping.')
        source_event_seqs = _read_only("source_event_seqs", "None or the frozen list of source seqs.")
        line = _read_only(
            "line", "The log line the event was built with (a live session's log-only events), else empty."
        )

    @property
    def data_json(self) -> str:
        """The data as compact JSON text (empty when built from data)."""
        if not self._data_json and self._line:
            # A log-only line ends with `,"data":<data>}`; a `,"` never occurs inside a JSON
            # string (its quote would be escaped), so the first one after the seq is this one.
            line = self._line
            self._data_json = line[line.index(',"data":') + 8 : -1]
        return self._data_json

    @property
    def data(self) -> JsonValue:
        """The event's data as frozen JSON containers."""
        data = self._data
        if data is UNPARSED:
            data = self._data = frozen_loads_compact(self.data_json)
        return data

    def _key(self) -> tuple[object, ...]:
        return (self._type, self._seq, self._time, self.data, self._surface_op, self._source_event_seqs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self._type, self._seq, self._time))

    def __repr__(self) -> str:
        return (
            f"Event(type={self._type!r}, seq={self._seq!r}, time={self._time!r}, data={self.data!r}, "
            f"surface_op={self._surface_op!r}, source_event_seqs={self._source_event_seqs!r})"
        )

    def to_json(self) -> dict[str, JsonValue]:
        """The log form of this event (frozen containers inside; serialise or `thaw` it)."""
        out: dict[str, JsonValue] = {"type": self._type, "seq": self._seq, "time": self._time, "data": self.data}
        if self._source_event_seqs is not None:
            out["sourceEventSeqs"] = self._source_event_seqs
        if self._surface_op is not None:
            out["surfaceOp"] = self._surface_op
        return out

    def to_line(self) -> str:
        """Compact JSON, one line, as the JSONL interchange format writes it."""
        if self._line:
            return self._line
        if not self._data_json:
            return _compact(self.to_json())
        # The same bytes as encoding to_json(), reusing the data's text (the bulk of the line).
        kind = _type_json(self._type)
        if self._source_event_seqs is None and self._surface_op is None:
            return f'{{"type":{kind},"seq":{self._seq},"time":{self._time},"data":{self._data_json}}}'
        head = f'{{"type":{kind},"seq":{self._seq},"time":{self._time},"data":{self._data_json}'
        if self._source_event_seqs is not None:
            head += ',"sourceEventSeqs":' + _seqs_json(self._source_event_seqs)
        if self._surface_op is not None:
            head += ',"surfaceOp":' + _compact(self._surface_op)
        return head + "}"


_new_event = object.__new__


def log_only_event(type: str, seq: int, time: int, time_text: str, data: JsonValue) -> Event:
    """A log-only event (no surface fields) built with its log line; raises NotLosslessJson.

    Appending is bound by this (most of a log is stream chunks), and in CPython a call costs
    about as much as the work, so one frame does what `canonical_text`, `Event(...)` and
    `to_line` would do in three. `data` is checked exactly as `canonical_text` checks it (the
    same test, inline, with its standard path as the fallback); `time_text` is `str(time)`,
    which the caller keeps while the milliseconds stay the same.
    """
    try:
        out = FAST_DUMPS(data)
    except TypeError:
        data_json = standard_text(data)
    else:
        data_json = out.decode()
        if "e-" in data_json or "0.0" in data_json or FAST_LOADS(out) != data:
            data_json = standard_text(data)
    try:
        kind = _TYPE_JSON[type]
    except KeyError:
        kind = _type_json(type)
    event = _new_event(Event)
    event._type, event._seq, event._time, event._data = type, seq, time, UNPARSED
    event._surface_op = event._source_event_seqs = None
    event._data_json = ""
    event._line = f'{{"type":{kind},"seq":{seq},"time":{time_text},"data":{data_json}}}'
    return event


# Getters straight from the slots, for loops over a whole batch in C (`map`): reading through
# the public properties costs about twice as much per event.
type_of = attrgetter("_type")
seq_of = attrgetter("_seq")
line_of = attrgetter("_line")


def positions(items: Sequence[object], value: object) -> Iterator[int]:
    """The indexes at which `value` occurs in `items`, in order.

    For batch scans that look for something rare (an event type, a missing line) among
    thousands of stream chunks: `list.index` compares in C, so the cost is one Python step per
    hit, where a `map` over every item costs a call each.
    """
    at = -1
    while True:
        try:
            at = items.index(value, at + 1)
        except ValueError:
            return
        yield at


_TYPE_JSON: dict[str, str] = {}
"""Event types already spelled as JSON strings, by `type_json`."""


def _type_json(kind: str) -> str:
    """An event type as a JSON string, remembered: types are a small vocabulary, one per line."""
    text = _TYPE_JSON.get(kind)
    if text is None:
        text = json.dumps(kind, ensure_ascii=False)
        if len(_TYPE_JSON) < 1024:  # an imported log may hold any number of types
            _TYPE_JSON[kind] = text
    return text


def _compact(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _seqs_json(seqs: JsonValue) -> str:
    """`_compact(seqs)` for a list of seqs: an assistant message lists every chunk of its step,
    and the fast encoder spells integers as the standard one does, about ten times sooner. Every
    other number (a float, a bool, an integer past 64 bits) takes the standard path."""
    try:
        text = FAST_DUMPS(seqs).decode()
    except TypeError:
        return _compact(seqs)
    return _compact(seqs) if "." in text or "e" in text else text


def event_from_json(raw: JsonValue, *, expected_seq: int | None = None) -> Event:
    """Build an event from its parsed log form, checking the envelope (not the surface)."""
    if not isinstance(raw, Mapping):
        raise InvalidEvent("invalid event envelope: not an object")
    extra = set(raw) - ENVELOPE_KEYS
    if extra:
        raise InvalidEvent(f"invalid event envelope: unexpected key(s) {sorted(extra)}")
    kind, seq, time = raw.get("type"), raw.get("seq"), raw.get("time")
    if not isinstance(kind, str) or not kind:
        raise InvalidEvent("invalid event envelope: type must be a non-empty string")
    if not is_safe_int(seq):
        raise InvalidEvent(f"invalid event envelope: seq {seq!r} is not a non-negative safe integer")
    if expected_seq is not None and seq != expected_seq:
        raise InvalidEvent(f"session event seq {seq} is not contiguous; expected {expected_seq}")
    if not is_safe_int(time):
        raise InvalidEvent(f"invalid event envelope: time {time!r} is not a non-negative safe integer")
    if "data" not in raw:
        raise InvalidEvent("invalid event envelope: data is missing")
    if kind in ("request/header-delta", "mode/set"):
        raise InvalidEvent(f"legacy event type {kind!r} is not supported")
    try:
        data_text = canonical_text(raw["data"])
    except NotLosslessJson as exc:
        raise InvalidEvent(f'session event "{kind}" carries non-JSON-serializable data ({exc})') from None
    if kind == "request/header" and isinstance(raw["data"], Mapping) and raw["data"].get("reason") == "fallback":
        raise InvalidEvent("legacy request/header reason 'fallback' is not supported")
    return Event(
        type=kind,
        seq=seq,
        time=time,
        surface_op=_freeze(kind, "surfaceOp", raw["surfaceOp"]) if "surfaceOp" in raw else None,
        source_event_seqs=(
            _freeze(kind, "sourceEventSeqs", raw["sourceEventSeqs"]) if "sourceEventSeqs" in raw else None
        ),
        data_json=data_text,
    )


def _freeze(kind: str, key: str, value: JsonValue) -> JsonValue:
    # JSON null is "carried" (and then invalid), so keep a marker distinct from absence.
    if value is None:
        return NULL_MARKER
    try:
        return frozen_loads(canonical_text(value))
    except NotLosslessJson as exc:
        raise InvalidEvent(f'session event "{kind}" carries a non-JSON-serializable {key} ({exc})') from None


class _NullMarker:
    """A carried JSON null in an envelope field (absent is None); always invalid there."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "null"


NULL_MARKER = _NullMarker()


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Immutable metadata of a session, kept outside its log."""

    id: str
    created_at: int | float
    cwd: str | None = None
    version: int = SESSION_FORMAT_VERSION
    parent_session: str | None = None
    seed_length: int | None = None
    delegation_depth: int | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The header line of the JSONL format (`delegationDepth` always written, 0 if absent)."""
        out: dict[str, JsonValue] = {
            "type": "session",
            "version": self.version,
            "id": self.id,
            "createdAt": self.created_at,
        }
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.parent_session is not None:
            out["parentSession"] = self.parent_session
        if self.seed_length is not None:
            out["seedLength"] = self.seed_length
        out["delegationDepth"] = self.delegation_depth or 0
        return out


def header_from_json(raw: JsonValue) -> SessionHeader:
    """Validate a JSONL header line's object."""
    if not isinstance(raw, Mapping) or raw.get("type") != "session":
        raise InvalidEvent("first line is not a session header")
    if raw.get("version") != SESSION_FORMAT_VERSION or type(raw.get("version")) is not int:
        raise InvalidEvent(f"unsupported session format version {raw.get('version')!r}")
    sid, created = raw.get("id"), raw.get("createdAt")
    if not isinstance(sid, str):
        raise InvalidEvent("session header id must be a string")
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        raise InvalidEvent("session header createdAt must be a finite number")
    cwd = raw.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/")):
        raise InvalidEvent(f"session header cwd must be an absolute path, got {cwd!r}")
    parent = raw.get("parentSession")
    if parent is not None and not isinstance(parent, str):
        raise InvalidEvent("session header parentSession must be a string")
    for key in ("seedLength", "delegationDepth"):
        if key in raw and not is_safe_int(raw[key]):
            raise InvalidEvent(f"session header {key} must be a non-negative safe integer")
    return SessionHeader(
        id=sid,
        created_at=created,
        cwd=cwd,
        parent_session=parent,
        seed_length=raw.get("seedLength"),
        delegation_depth=raw.get("delegationDepth"),
    )


def display_prompt_content(data: Json) -> JsonValue:
    """The direct prompt of a user/steering message: the envelope's display content if any."""
    envelope = data.get("envelope")
    if isinstance(envelope, Mapping) and envelope.get("displayContent") is not None:
        return envelope["displayContent"]
    return data.get("content", [])


class SurfaceText(NamedTuple):
    """What a surface event shows a reader: its type, its source, and its display text.

    The text is the `text` blocks of the display content (the envelope's, when a prompt had
    context baked in) joined with newlines. The store keeps one per surface node, so readers
    that need only text (session references, titles) never decode the events themselves.
    """

    type: str
    source_kind: str | None
    source_plugin: str | None
    text: str


def surface_text(type: str, data: JsonValue) -> SurfaceText:
    """The `SurfaceText` of an event given its type and data."""
    if not isinstance(data, Mapping):
        return SurfaceText(type, None, None, "")
    source = data.get("source")
    kind = plugin = None
    if isinstance(source, Mapping):
        kind, plugin = source.get("kind"), source.get("plugin")
    return SurfaceText(
        type,
        kind if isinstance(kind, str) else None,
        plugin if isinstance(plugin, str) else None,
        text_of(display_prompt_content(data)),
    )


def text_of(blocks: JsonValue, sep: str = "\n") -> str:
    """The `text` blocks of a content list, joined with `sep`."""
    if not isinstance(blocks, list):
        return ""
    return sep.join(
        b["text"]
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )
