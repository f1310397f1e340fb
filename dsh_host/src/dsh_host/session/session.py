"""A live session: an append-only event log with its surface folded incrementally."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from time import time_ns
from typing import TYPE_CHECKING

from dsh_host.session.events import (
    SURFACE_TYPES,
    Event,
    SessionHeader,
    event_from_json,
    log_only_event,
)
from dsh_host.session.frozen import FrozenList, frozen_loads
from dsh_host.session.lossless import NotLosslessJson, canonical_text
from dsh_host.session.messages import derive_event_message
from dsh_host.session.request_header import canonical_header
from dsh_host.session.surface import Surface, SurfaceError, plan_transition

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue

log = logging.getLogger("dsh.session")

_LEGACY_TYPES = frozenset({"request/header-delta", "mode/set"})
# Types an append checks beyond its data, or folds into the surface.
_CHECKED_TYPES = SURFACE_TYPES | _LEGACY_TYPES | {"request/header"}

Listener = Callable[["Session", Event], None]


def now_ms() -> int:
    """The current time in milliseconds since the epoch, as events and headers record it."""
    return time_ns() // 1_000_000


class Session:
    """An append-only, contiguous, lossless-JSON event log.

    `append` validates the event (lossless data, envelope rules, surface transition) before
    anything changes, so a rejected append leaves the log and the surface as they were.
    Listeners run synchronously after each append; their failures are logged and contained.
    Events not yet handed to persistence wait in `pending` until the registry flushes them.
    `clock` gives event times in milliseconds (tests pin it); without one, `append` reads the
    system clock itself, as `now_ms` does, rather than paying a call per event.
    """

    def __init__(
        self,
        header: SessionHeader,
        seed: Iterable[Event] = (),
        *,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.header = header
        self._clock = clock
        self._log: list[Event] = []
        self._events_cache: tuple[Event, ...] = ()
        self.surface = Surface()
        self._listeners: list[Listener] = []
        self._publishing = False
        self._messages: list[dict[str, JsonValue]] = []
        self._messages_upto = 0
        self._messages_generation = 0
        self._header_snapshot: Json | None = None
        self._header_upto = 0
        self._time_text: tuple[int, str] = (-1, "")
        for index, event in enumerate(seed):
            try:
                self._commit(event, index)
            except SurfaceError as exc:
                raise SurfaceError(f"invalid seed event at index {index}: {exc}") from None
        # The log's events from this index on are pending: appends only add to the log (a turn's
        # thousand chunks pay for one list, not two), and a flush moves the index.
        self._flushed = len(self._log)

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def cwd(self) -> str | None:
        return self.header.cwd

    @property
    def seq(self) -> int:
        """The seq the next event will get (the log's length)."""
        return len(self._log)

    @property
    def events(self) -> tuple[Event, ...]:
        """A snapshot of the log; a tuple returned earlier never grows."""
        if len(self._events_cache) != len(self._log):  # the log only grows
            self._events_cache = tuple(self._log)
        return self._events_cache

    def event(self, seq: int) -> Event:
        return self._log[seq]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(session, event)` after every append; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def append(
        self,
        type: str,
        data: JsonValue,
        *,
        surface_op: str | Json | None = None,
        sources: Sequence[int] | None = None,
    ) -> Event:
        """Append one event and return it, frozen. Raises and changes nothing when invalid."""
        if self._publishing:
            raise RuntimeError("session append cannot reenter while another append is being published")
        if surface_op is None and sources is None and type not in _CHECKED_TYPES:
            # A plain log-only event (most of a log): no rule below applies and nothing folds.
            seq = len(self._log)
            time = time_ns() // 1_000_000 if self._clock is None else self._clock()  # `_now()`, inline
            if time != self._time_text[0]:  # a turn's events share a few milliseconds: spell each once
                self._time_text = (time, str(time))
            try:
                event = log_only_event(type, seq, time, self._time_text[1], data)
            except NotLosslessJson as exc:
                raise _not_lossless(type, exc) from None
            self._log.append(event)
            if self._listeners:
                self._publish(event)
            return event
        try:
            data_text = canonical_text(data)
        except NotLosslessJson as exc:
            raise _not_lossless(type, exc) from None
        op = surface_op if surface_op is None or surface_op == "append" else frozen_loads(canonical_text(surface_op))
        if type in _LEGACY_TYPES:
            raise ValueError(f"legacy event type {type!r} is not supported")
        event = Event(
            type,
            len(self._log),
            self._now(),
            surface_op=op,
            source_event_seqs=None if sources is None else FrozenList(sources),
            data_json=data_text,
        )
        if type == "request/header" and isinstance(event.data, Mapping) and event.data.get("reason") == "fallback":
            raise ValueError("legacy request/header reason 'fallback' is not supported")
        self._commit(event, event.seq)
        if self._listeners:
            self._publish(event)
        return event

    def _now(self) -> int:
        return time_ns() // 1_000_000 if self._clock is None else self._clock()

    def append_raw(self, raw: Json) -> Event:
        """Append an event given in log form (used by crash repair and import)."""
        event = event_from_json(raw, expected_seq=len(self._log))
        self._commit(event, event.seq)
        if self._listeners:
            self._publish(event)
        return event

    def _commit(self, event: Event, index: int) -> None:
        if event.seq != index:
            raise SurfaceError(f"session event seq {event.seq} is not contiguous; expected {index}")
        if event.surface_op is None and event.source_event_seqs is None and event.type not in SURFACE_TYPES:
            self._log.append(event)  # a plain log-only event (most of a log): nothing to fold
            return
        transition = plan_transition(event, self.surface.nodes, self._log.__getitem__)
        self._log.append(event)
        self.surface.apply(transition)

    def _publish(self, event: Event) -> None:
        self._publishing = True
        try:
            for listener in list(self._listeners):
                try:
                    listener(self, event)
                except Exception:
                    log.warning("session/event listener failed on %s #%d", event.type, event.seq, exc_info=True)
        finally:
            self._publishing = False

    def derive_messages(self) -> list[dict[str, JsonValue]]:
        """Model messages of the current surface, projected once per node and cached.

        A replace (a new `replace_generation`) rebuilds from the head; appends project only the
        new nodes. Each call returns a new list over shared message dicts.
        """
        nodes = self.surface.nodes
        if self._messages_generation != self.surface.replace_generation:
            self._messages, self._messages_upto = [], 0
            self._messages_generation = self.surface.replace_generation
        for seq in nodes[self._messages_upto :]:
            message = derive_event_message(self._log[seq])
            if message is not None:
                self._messages.append(message)
        self._messages_upto = len(nodes)
        return list(self._messages)

    def request_header(self) -> Json | None:
        """The canonical latest `request/header` snapshot, folded incrementally."""
        for event in self._log[self._header_upto :]:
            if event.type == "request/header":
                self._header_snapshot = canonical_header(event.data["header"])
        self._header_upto = len(self._log)
        return self._header_snapshot

    def open_turn(self) -> int | None:
        """The number of the turn left open at the end of the log, if any."""
        for event in reversed(self._log):
            if event.type == "turn/start":
                return _turn_of(event)
            if event.type == "turn/end":
                return None
        return None

    def last_turn_number(self) -> int:
        """The number of the latest turn boundary (0 for none); turn numbers come from the log."""
        for event in reversed(self._log):
            if event.type in ("turn/start", "turn/end"):
                return _turn_of(event) or 0
        return 0

    @property
    def pending(self) -> list[Event]:
        """The events appended since the last successful flush, oldest first (a new list)."""
        return self._log[self._flushed :]

    def mark_flushed(self, count: int) -> None:
        """Count the first `count` pending events as persisted."""
        self._flushed += count


def _not_lossless(type: str, exc: NotLosslessJson) -> NotLosslessJson:
    return NotLosslessJson(f'session event "{type}" carries non-JSON-serializable data ({exc})')


def _turn_of(event: Event) -> int | None:
    # Imported logs are checked for their envelope, not for every type's data shape.
    turn = event.data.get("turn") if isinstance(event.data, Mapping) else None
    return turn if type(turn) is int else None
