"""What both stores write and read the same way: event batches, header rows, read records, errors.

A store's own module maps these onto its tables; nothing here knows SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from itertools import compress

from dsh_host.session.events import (
    SURFACE_TYPES,
    Event,
    SessionHeader,
    SurfaceText,
    event_from_json,
    line_of,
    positions,
    seq_of,
    type_of,
)
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts
from dsh_host.store.base import StoreError
from dsh_host.store.codec import json_text

# Only these types can touch the surface rows (the fold refuses a surface marker on any other) or the title.
_MARKED_TYPES = SURFACE_TYPES | {"session/title"}

Title = tuple[str, int, int]
"""A session's latest title as its row keeps it: the text, seq and time of its `session/title` event."""


class Batch:
    """A batch of events as a store writes it, checked and picked apart before any SQL runs.

    A flush is mostly stream chunks, so the per-event work runs in C (`map`, `compress`) and
    Python looks only at the few events that touch the surface or the title. A batch whose
    seqs are not contiguous is a `StoreError` here, so nothing of it is written.
    """

    __slots__ = ("events", "first", "header", "kinds", "last", "nodes", "title")

    def __init__(self, header: SessionHeader, events: Sequence[Event]) -> None:
        first = events[0].seq
        seqs = list(map(seq_of, events))
        if seqs != list(range(first, first + len(seqs))):
            at = next(i for i, seq in enumerate(seqs) if seq != first + i)
            raise StoreError(
                f"session {header.id!r}: batch is not contiguous (seq {seqs[at]} where {first + at} "
                "was expected); nothing was written"
            )
        self.header = header
        self.events = events
        self.first, self.last = first, seqs[-1]
        self.kinds: list[str] = list(map(type_of, events))
        marked = list(compress(events, map(_MARKED_TYPES.__contains__, self.kinds)))
        self.nodes = [event for event in marked if event.surface_op is not None]  # those changing the surface
        self.title: Title | None = None
        for event in marked:
            if event.type == "session/title" and isinstance(event.data, dict):
                title = event.data.get("title")
                if isinstance(title, str):
                    self.title = (title, event.seq, event.time)

    def lines(self) -> list[str]:
        """Every event's log line as the stores keep it (`json_text`), in seq order."""
        lines = list(map(line_of, self.events))
        for at in positions(lines, ""):
            lines[at] = self.events[at].to_line()  # an event built without its line
        if not "".join(lines).isascii():  # one C pass over the bytes, where `map` calls once per line
            lines = list(map(json_text, lines))
        return lines

    def check_start(self, next_seq: int) -> None:
        """Refuse a batch that does not start where the stored session ends."""
        if self.first != next_seq:
            raise StoreError(
                f"session {self.header.id!r}: batch starts at seq {self.first}, store expects {next_seq} "
                "(another process wrote this session?); nothing was written"
            )

    def not_stored(self) -> StoreError:
        """The error for a later batch of a session the store does not hold."""
        return StoreError(f"session {self.header.id!r} is not stored; its first batch must start at seq 0")


def already_exists(session_id: str) -> StoreError:
    """The error for importing over a stored session without `replace`."""
    return StoreError(f"session {session_id!r} already exists (use --replace to overwrite it)")


def surface_disagrees(event: Event) -> StoreError:
    """The error for a replace whose range the stored surface does not hold."""
    return StoreError(f"stored surface disagrees with replace at seq {event.seq}")


def header_json(header: SessionHeader) -> str:
    """The header as a store keeps it: its JSON text."""
    return json_text(json.dumps(header.to_json(), ensure_ascii=False))


def header_from_row(text: str, session_id: str | None = None) -> SessionHeader:
    """The header a store kept as JSON text; `session_id` (the exact id column) wins over its JSON."""
    raw = json.loads(text)
    return SessionHeader(
        # The id column is exact; JSON text would merge a Python string's surrogate halves.
        id=raw["id"] if session_id is None else session_id,
        created_at=raw["createdAt"],
        cwd=raw.get("cwd"),
        version=raw.get("version", 0),
        parent_session=raw.get("parentSession"),
        seed_length=raw.get("seedLength"),
        delegation_depth=raw.get("delegationDepth"),
    )


def events_from_lines(lines: Iterable[str]) -> list[Event]:
    """The events of a session's stored log lines (all of them, in seq order)."""
    return [event_from_json(json.loads(line), expected_seq=i) for i, line in enumerate(lines)]


def surface_snapshot(header_text: str, session_id: str, next_seq: int, lines: Iterable[tuple[str]]) -> SurfaceSnapshot:
    """A `SurfaceSnapshot` from a session row's header and next seq and its surface event lines."""
    loads = json.loads
    return SurfaceSnapshot(
        header=header_from_row(header_text, session_id),
        captured_through_seq=next_seq - 1 if next_seq else None,
        events=[loads(line) for (line,) in lines],
    )


def surface_texts(header_text: str, session_id: str, next_seq: int, texts: list[SurfaceText]) -> SurfaceTexts:
    """A `SurfaceTexts` from a session row's header and next seq and its nodes' texts."""
    return SurfaceTexts(
        header=header_from_row(header_text, session_id),
        captured_through_seq=next_seq - 1 if next_seq else None,
        texts=texts,
    )
