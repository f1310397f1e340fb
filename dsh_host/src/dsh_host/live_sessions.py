"""Live sessions of this process and their write-behind persistence.

Appends are synchronous and do no I/O; events wait in `Session.pending` until `flush`, which
writes them to the store in one transaction. The agent flushes at its checkpoints (before a
model request, before a tool body, after a step, at turn end). Every store call of the async
methods runs on a worker thread, so a slow store never stalls the event loop.

asyncio is imported by the async methods (an event loop has loaded it by then): a host that
only lists stored sessions never loads it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from itertools import compress
from typing import TYPE_CHECKING

from dsh_host.errors import DshError
from dsh_host.session.check import resume_refusal
from dsh_host.session.events import SessionHeader, type_of
from dsh_host.session.repair import interrupted_turn_closers
from dsh_host.session.session import Session, now_ms
from dsh_host.store.base import SessionStore, StoreError
from dsh_host.titles import fallback_title_data, latest_title

if TYPE_CHECKING:
    import asyncio


def new_session_id() -> str:
    """A short random id; ids are otherwise arbitrary strings."""
    return secrets.token_hex(6)


class SessionRegistry:
    """The live sessions of a host, persisted through the store `store()` returns."""

    def __init__(self, store: Callable[[], SessionStore], *, read_only: Callable[[str], None] = lambda _: None) -> None:
        """`read_only(id)` raises for a session that must not be written (a source's)."""
        self._store = store
        self._read_only = read_only
        self._live: dict[str, Session] = {}
        self._untitled: set[str] = set()
        self._flushing: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}

    def create(self, cwd: str | None, session_id: str | None = None, *, created_at: int | None = None) -> Session:
        """A new live session (persisted from its first flush on).

        With an explicit `session_id` this asks the store (a blocking call) whether the id is
        taken; async code uses `open_new`, which asks from a worker thread.
        """
        if session_id is not None:
            self._read_only(session_id)
            if self._store().has(session_id):
                raise StoreError(f"session {session_id!r} already has a persisted log")
        return self._add(cwd, session_id, created_at)

    async def open_new(self, cwd: str | None, session_id: str | None = None) -> Session:
        """`create` for async callers: the store is asked on a worker thread."""
        import asyncio

        if session_id is not None:
            self._read_only(session_id)
            if await asyncio.to_thread(lambda: self._store().has(session_id)):
                raise StoreError(f"session {session_id!r} already has a persisted log")
        return self._add(cwd, session_id, None)

    def _add(self, cwd: str | None, session_id: str | None, created_at: int | None) -> Session:
        sid = session_id if session_id is not None else new_session_id()
        if sid in self._live:
            raise StoreError(f"session {sid!r} already exists")
        header = SessionHeader(id=sid, created_at=created_at if created_at is not None else now_ms(), cwd=cwd)
        session = Session(header)
        self._live[sid] = session
        self._untitled.add(sid)
        return session

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def live(self) -> list[Session]:
        return list(self._live.values())

    async def resume(self, session_id: str) -> Session:
        """Load a persisted session and make it live, closing a turn a crash left open."""
        import asyncio

        if session_id in self._live:
            return self._live[session_id]
        self._read_only(session_id)
        header, events = await asyncio.to_thread(lambda: self._store().read_events(session_id))
        if session_id in self._live:  # resumed by another task while we read
            return self._live[session_id]
        refusal = resume_refusal(header, events)
        if refusal is not None:
            # Such a log reads, exports and can be referenced; a turn on it would fail mid-way.
            raise DshError(f"session {session_id} cannot be resumed: {refusal}", code="NOT_RESUMABLE")
        session = Session(header, events)
        if latest_title(events) is None:
            self._untitled.add(session_id)
        for closer in interrupted_turn_closers(events):
            session.append_raw(closer)
        self._live[session_id] = session
        await self.flush(session)
        return session

    async def flush(self, session: Session) -> None:
        """Make every pending event of `session` durable, in one transaction.

        An untitled session whose pending events hold its first direct prompt gets its
        fallback title here, in the same batch, so a title is never lost to a crash window.
        The store writes on a worker thread; flushes of one session run one at a time, and
        events appended meanwhile wait for the next flush.
        """
        import asyncio

        async with self._flush_lock(session.id):
            if session.id in self._untitled:
                self._title(session)
            batch = session.take_pending()
            if not batch:
                return
            await asyncio.to_thread(lambda: self._store().append(session.header, batch))
            session.mark_flushed(len(batch))

    def _flush_lock(self, session_id: str) -> asyncio.Lock:
        # A lock belongs to one event loop; a host may serve several in turn (one asyncio.run each).
        import asyncio

        loop = asyncio.get_running_loop()
        held = self._flushing.get(session_id)
        if held is None or held[0] is not loop:
            held = self._flushing[session_id] = (loop, asyncio.Lock())
        return held[1]

    def _title(self, session: Session) -> None:
        # A flush is mostly stream chunks: the scans run in C (map, compress), not per event in Python.
        kinds = list(map(type_of, session.pending))
        if "session/title" in kinds:
            self._untitled.discard(session.id)
            return
        data = fallback_title_data(compress(session.pending, map("user/message".__eq__, kinds)))
        if data is None:
            return
        self._untitled.discard(session.id)
        append_out_of_band(session, "session/title", data, {"kind": "session-title"})

    async def close(self) -> None:
        """Flush every live session and forget them."""
        for session in list(self._live.values()):
            await self.flush(session)
        self._live.clear()

    def forget(self, session_id: str) -> None:
        self._live.pop(session_id, None)
        self._untitled.discard(session_id)
        self._flushing.pop(session_id, None)


def append_out_of_band(session: Session, type: str, data: dict, trigger: dict) -> None:
    """Append a log-only event: into the open turn, or inside a zero-step turn of its own."""
    if session.open_turn() is not None:
        session.append(type, data)
        return
    turn = session.last_turn_number() + 1
    session.append("turn/start", {"turn": turn, "trigger": trigger})
    try:
        session.append(type, data)
    finally:
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
