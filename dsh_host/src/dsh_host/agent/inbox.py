"""The agent's inbox: frozen message records in two FIFOs, queued and steering.

A record is the message content, its resolved source and the contexts attached to it,
snapshotted as lossless JSON in one pass and frozen whole. The same record object travels
through queueing, steering, re-queueing, prompt admission and placement, so its contexts can
only ever be written together with it, or dropped together with it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from dsh_host.agent.tickets import Ticket
from dsh_host.session.frozen import FrozenDict, frozen_loads
from dsh_host.session.lossless import NotLosslessJson, canonical_text

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json

USER_SOURCE = FrozenDict(kind="user")

Content: TypeAlias = "str | Sequence[Json]"
"""A message's content: a list of content blocks, or a string as shorthand for one text block."""


class _Absent:
    """An optional argument that was not given; None is JSON null, a value like any other."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()
SNAPSHOT_ERROR = "agent message content, source, and contexts must be losslessly JSON-serializable"


@dataclass(frozen=True)
class InboxRecord:
    """One message waiting for the agent: frozen content blocks, source and contexts."""

    content: Sequence[Json]
    source: Json
    contexts: Sequence[Json]
    ticket: Ticket | None = field(default=None, compare=False, repr=False)


def as_content(content: Content) -> Sequence[Json]:
    """Content blocks as given; a plain string is shorthand for one text block."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def snapshot_record(
    content: Content, source: Json | None, contexts: Sequence[Json] | None, ticket: Ticket | None = None
) -> InboxRecord:
    """Snapshot and freeze one message; TypeError when any part is not lossless JSON.

    `contexts` is a list or tuple of context mappings (None: none). The caller keeps its
    objects: later changes to them never reach the record.
    """
    if contexts is not None and not isinstance(contexts, (list, tuple)):
        raise TypeError(SNAPSHOT_ERROR)
    value = {
        "content": as_content(content),
        "source": source if source is not None else USER_SOURCE,
        "contexts": list(contexts or ()),
    }
    try:
        frozen = frozen_loads(canonical_text(value))
    except NotLosslessJson:
        raise TypeError(SNAPSHOT_ERROR) from None
    return InboxRecord(content=frozen["content"], source=frozen["source"], contexts=frozen["contexts"], ticket=ticket)


class Inbox:
    """Two FIFOs: `queued` (one record claimed per turn) and `steering` (drained inside a turn)."""

    def __init__(self) -> None:
        self._queued: deque[InboxRecord] = deque()
        self._steering: deque[InboxRecord] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    @property
    def has_queued(self) -> bool:
        return bool(self._queued)

    @property
    def has_steering(self) -> bool:
        return bool(self._steering)

    def enqueue(self, record: InboxRecord) -> None:
        """Queue `record` for a turn of its own and wake the driver if it waits."""
        self._queued.append(record)
        self._wake()

    def steer(self, record: InboxRecord) -> None:
        """Hold `record` for the running turn's next steering checkpoint (never wakes the driver)."""
        self._steering.append(record)

    def dequeue(self) -> InboxRecord:
        """Claim the oldest queued record; IndexError when nothing is queued."""
        return self._queued.popleft()

    def drain_steering(self) -> list[InboxRecord]:
        """Remove and return every steering record, oldest first."""
        drained = list(self._steering)
        self._steering.clear()
        return drained

    def clear(self) -> None:
        """Drop every record of both FIFOs, undelivered (their tickets resolve as dropped)."""
        _drop(self._queued)
        _drop(self._steering)

    def discard_steering(self) -> None:
        """Drop every steering record, undelivered (their tickets resolve as dropped)."""
        _drop(self._steering)

    def close(self) -> None:
        """Stop waiting for good: the agent is disposed and its records are never claimed."""
        self._closed = True
        self._wake()

    async def wait_for_queued(self) -> None:
        """Return once a record is queued or the inbox is closed."""
        if self._queued or self._closed:
            return
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            if self._waiter is waiter:
                self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _drop(records: deque[InboxRecord]) -> None:
    dropped = list(records)
    records.clear()
    for record in dropped:
        if record.ticket is not None:
            record.ticket.drop()
