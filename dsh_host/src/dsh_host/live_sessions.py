"""Live sessions of this process, their write-behind persistence, and the leases that let them be driven.

Appends are synchronous and do no I/O; events wait in `Session.pending` until `flush`, which
writes them to the store in one transaction. The agent flushes at its checkpoints (before a
model request, before a tool body, after a step, at turn end). Every store call of the async
methods runs on a worker thread, so a slow store never stalls the event loop, with one exception:
a store that can lease and write a short batch without waiting on anything (`QuickLeasingStore`,
as the SQLite store can) does that on the loop's thread, and hands the write to a worker thread
only when it would wait.

One host drives a session at a time. The registry takes a session's lease from the store before
it drives the session (`resume` takes it before reading the log, so crash repair happens only
under it; a new session's is taken by its first flush) and writes the session through it; the
agents of this host on one session share that lease. It is given up when the last agent on the
session closes, on `release` or `forget`, and when the registry closes. A store that keeps no
leases is written directly, with a warning (once) that it cannot keep two drivers apart.

asyncio is imported by the async methods (an event loop has loaded it by then): a host that
only lists stored sessions never loads it.
"""

from __future__ import annotations

import functools
import logging
import secrets
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from dsh_host.errors import DshError
from dsh_host.session.check import resume_refusal
from dsh_host.session.events import Event, SessionHeader, positions, type_of
from dsh_host.session.repair import interrupted_turn_closers
from dsh_host.session.session import Session, now_ms
from dsh_host.store.base import (
    LeasingStore,
    QuickLease,
    QuickLeasingStore,
    SessionBusy,
    SessionLease,
    SessionNotFound,
    SessionStore,
    StoreError,
    id_not_available,
)
from dsh_host.titles import fallback_title_data, latest_title

if TYPE_CHECKING:
    import asyncio

    from dsh_host.jsontypes import JsonValue

log = logging.getLogger("dsh.store")


def new_session_id() -> str:
    """A short random id; ids are otherwise arbitrary strings."""
    return secrets.token_hex(6)


@functools.cache
def _keeps_leases(store_type: type) -> bool:
    # By type, once: a check against a runtime protocol inspects every member each time.
    return issubclass(store_type, LeasingStore)


@functools.cache
def _writes_now(store_type: type) -> bool:
    """Whether a store of this type leases on the calling thread (see `QuickLeasingStore`)."""
    return issubclass(store_type, QuickLeasingStore)


@functools.cache
def _quick_lease(lease_type: type) -> bool:
    """Whether a lease of this type writes on the calling thread when it need not wait (`QuickLease`).

    By its method: a protocol with a property cannot be checked with `issubclass`, and a
    quick store's lease may come wrapped (a test's, a plugin's) in one that has only `append`.
    """
    return callable(getattr(lease_type, "append_now", None))


class _Unleased:
    """How a session is written on a store that keeps no leases: its plain `append`."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self.session_id = session_id

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        self._store.append(header, events)

    def release(self) -> None:
        """Nothing to give up."""


class SessionRegistry:
    """The live sessions of a host, persisted through the store `store()` returns, under their leases."""

    def __init__(self, store: Callable[[], SessionStore], *, read_only: Callable[[str], None] = lambda _: None) -> None:
        """`read_only(id)` raises for a session that must not be written (a source's)."""
        self._store = store
        self._read_only = read_only
        self._live: dict[str, Session] = {}
        self._untitled: set[str] = set()
        self._leases: dict[str, SessionLease] = {}
        self._flushing: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
        self._opening: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
        # The agents of this host on each session, in the order they came: the first publishes.
        self._drivers: dict[Session, list[object]] = {}
        # Session objects no flush may write (opened read-only, or taken over by another host).
        self._refusals: weakref.WeakKeyDictionary[Session, Callable[[], StoreError]] = weakref.WeakKeyDictionary()
        self._warned_unleased = False

    def create(self, cwd: str | None, session_id: str | None = None, *, created_at: int | None = None) -> Session:
        """A new live session (persisted, and leased, from its first flush on).

        With an explicit `session_id` this asks the store (a blocking call) whether the id is
        taken; async code uses `open_new`, which asks from a worker thread.
        """
        if session_id is not None:
            self._read_only(session_id)
            if session_id in self._live or self._store().has(session_id):
                raise id_not_available(session_id)
        return self._add(cwd, session_id, created_at)

    async def open_new(self, cwd: str | None, session_id: str | None = None) -> Session:
        """`create` for async callers: the store is asked on a worker thread."""
        import asyncio

        if session_id is not None:
            self._read_only(session_id)
            if session_id in self._live or await asyncio.to_thread(lambda: self._store().has(session_id)):
                raise id_not_available(session_id)
        return self._add(cwd, session_id, None)

    def _add(self, cwd: str | None, session_id: str | None, created_at: int | None) -> Session:
        sid = session_id if session_id is not None else new_session_id()
        if sid in self._live:
            raise id_not_available(sid)
        header = SessionHeader(id=sid, created_at=created_at if created_at is not None else now_ms(), cwd=cwd)
        session = Session(header)
        self._live[sid] = session
        self._untitled.add(sid)
        return session

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def live(self) -> list[Session]:
        return list(self._live.values())

    async def resume(self, session_id: str, *, wait: float = 0.0) -> Session:
        """Take a stored session's lease, load it and make it live, closing a turn a crash left open.

        `SessionNotFound` when the store has no session of that id this principal may read;
        `SessionBusy` when another host drives it for longer than `wait` seconds (at once by
        default). Both before anything is written.
        """
        import asyncio

        if session_id in self._live:
            return self._live[session_id]
        self._read_only(session_id)
        async with self._loop_lock(self._opening, session_id):
            if session_id in self._live:  # resumed by another task while we waited
                return self._live[session_id]
            store = self._store()
            # Visibility first: a session this principal may not see is "not found", never "being driven".
            if not await asyncio.to_thread(store.has, session_id):
                raise SessionNotFound(session_id)
            await self._take_lease(session_id, wait)
            try:
                # Under the lease: a turn still open in this log is a crashed driver's.
                header, events = await asyncio.to_thread(store.read_events, session_id)
                refusal = resume_refusal(header, events)
                if refusal is not None:
                    # Such a log reads, exports and can be referenced; a turn on it would fail mid-way.
                    raise DshError(f"session {session_id} cannot be resumed: {refusal}", code="NOT_RESUMABLE")
            except BaseException:
                self._give_up_lease(session_id)
                raise
            session = Session(header, events)
            if latest_title(events) is None:
                self._untitled.add(session_id)
            for closer in interrupted_turn_closers(events):
                session.append_raw(closer)
            self._live[session_id] = session
        await self.flush(session)
        return session

    async def load(self, session_id: str) -> Session:
        """A read-only copy of a session, as this host has it or as stored: no lease, no repair.

        For work that reads a session without driving it (composing a preview): a turn a crash
        left open stays open, and a flush of the copy is a `StoreError` (nothing is written).
        """
        import asyncio

        self._read_only(session_id)
        live = self._live.get(session_id)
        if live is not None:
            session = Session(live.header, live.events)
        else:
            header, events = await asyncio.to_thread(self._store().read_events, session_id)
            session = Session(header, events)
        self._refusals[session] = lambda: StoreError(
            f"session {session_id!r} was opened read-only: nothing of it is written"
        )
        return session

    async def flush(self, session: Session) -> None:
        """Make every pending event of `session` durable, in one transaction, under its lease.

        An untitled session whose pending events hold its first direct prompt gets its
        fallback title here, in the same batch, so a title is never lost to a crash window.
        The store writes on a worker thread (on this one when it can without waiting, see
        `QuickLeasingStore`); flushes of one session run one at a time, and events appended
        meanwhile wait for the next flush. The first flush of a session this
        registry holds no lease of takes it (`SessionBusy` when another host drives it); when
        the lease turns out lost to another host, the session stops being driven here and
        every later flush of it raises `SessionBusy`.
        """
        async with self._loop_lock(self._flushing, session.id):
            if session.id in self._untitled:
                self._title(session)
            batch = session.pending
            if not batch:
                return
            refusal = self._refusals.get(session)
            if refusal is not None:
                raise refusal()
            try:
                lease = self._leases.get(session.id)
                if lease is not None:
                    await self._write(lease, session.header, batch)
                else:
                    async with self._loop_lock(self._opening, session.id):
                        await self._lease_and_write(session, batch)
            except SessionBusy:
                self._taken_over(session)
                raise
            session.mark_flushed(len(batch))

    async def _write(self, lease: SessionLease, header: SessionHeader, batch: Sequence[Event]) -> None:
        """Write `batch` through `lease`: on this thread when its store can do that without waiting
        (a thread hop costs about as much as writing a short batch), else on a worker thread."""
        import asyncio

        if _quick_lease(type(lease)) and cast(QuickLease, lease).append_now(header, batch):
            return
        await asyncio.to_thread(lease.append, header, batch)

    async def _lease_and_write(self, session: Session, batch: Sequence[Event]) -> None:
        """Take the lease of a session this registry drives without one yet, and write `batch`
        through it: both on this thread when the store allows (`QuickLeasingStore`), else both in
        one worker-thread call, as a thread hop costs about as much as either (a new session's
        first flush is most of what writing a short session costs)."""
        import asyncio

        session_id = session.id
        held = self._leases.get(session_id)  # taken by another task while this one waited
        if held is not None:
            await self._write(held, session.header, batch)
            return
        store = self._store()
        creating = batch[0].seq == 0
        if _writes_now(type(store)):
            lease = self._leases[session_id] = self._lease_from(store, session_id, 0.0, creating=creating)
            await self._write(lease, session.header, batch)
            return

        def lease_and_write() -> tuple[SessionLease, Exception | None]:
            lease = self._lease_from(store, session_id, 0.0, creating=creating)
            try:
                lease.append(session.header, batch)
            except Exception as exc:  # noqa: BLE001 - re-raised below, once the registry keeps the lease
                return lease, exc
            return lease, None

        lease, failure = await asyncio.to_thread(lease_and_write)
        self._leases[session_id] = lease
        if failure is not None:
            raise failure

    async def _take_lease(self, session_id: str, wait: float) -> SessionLease:
        """This registry's lease of a stored session, taken from the store when it holds none yet."""
        import asyncio

        held = self._leases.get(session_id)
        if held is None:
            held = self._leases[session_id] = await asyncio.to_thread(
                self._lease_from, self._store(), session_id, wait, creating=False
            )
        return held

    def _lease_from(self, store: SessionStore, session_id: str, wait: float, *, creating: bool) -> SessionLease:
        """`store`'s lease of `session_id` (a blocking call), or a plain writer when it keeps none.

        `creating`: the session is new here, so a refusal says only that the id is not
        available (a hidden session of another principal may hold it).
        """
        if not _keeps_leases(type(store)):
            if not self._warned_unleased:
                self._warned_unleased = True
                log.warning(
                    "the session store %s keeps no leases: it cannot keep two hosts from driving one session at once",
                    type(store).__name__,
                )
            return _Unleased(store, session_id)
        try:
            return cast(LeasingStore, store).lease(session_id, wait=wait)
        except SessionBusy:
            if creating:
                raise id_not_available(session_id) from None
            raise

    def _give_up_lease(self, session_id: str) -> None:
        held = self._leases.pop(session_id, None)
        if held is not None:
            held.release()

    def _taken_over(self, session: Session) -> None:
        """Another host took `session` while its lease was lost: stop driving it, refuse its flushes."""
        session_id = session.id
        self._refusals[session] = lambda: SessionBusy.taken_over(session_id)
        if self._live.get(session_id) is session:
            self.forget(session_id)
        else:
            self._give_up_lease(session_id)

    @staticmethod
    def _loop_lock(locks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]], session_id: str) -> asyncio.Lock:
        # A lock belongs to one event loop; a host may serve several in turn (one asyncio.run each).
        import asyncio

        loop = asyncio.get_running_loop()
        held = locks.get(session_id)
        if held is None or held[0] is not loop:
            held = locks[session_id] = (loop, asyncio.Lock())
        return held[1]

    def _title(self, session: Session) -> None:
        # A flush is mostly stream chunks: the scans run in C (map, list.index), not per event in Python.
        pending = session.pending
        kinds = list(map(type_of, pending))
        if "session/title" in kinds:
            self._untitled.discard(session.id)
            return
        data = fallback_title_data(pending[at] for at in positions(kinds, "user/message"))
        if data is None:
            return
        self._untitled.discard(session.id)
        append_out_of_band(session, "session/title", data, {"kind": "session-title"})

    # -- the agents driving a session ---------------------------------------------------------

    def attach(self, session: Session, agent: object) -> None:
        """Count `agent` among the drivers of `session` (until `detach`)."""
        self._drivers.setdefault(session, []).append(agent)

    def detach(self, session: Session, agent: object) -> None:
        drivers = self._drivers.get(session)
        if drivers is not None and agent in drivers:
            drivers.remove(agent)
            if not drivers:
                del self._drivers[session]

    def leads(self, session: Session, agent: object) -> bool:
        """Whether `agent` is the first attached driver of `session`: the one that publishes its events."""
        drivers = self._drivers.get(session)
        return drivers is not None and drivers[0] is agent

    async def agent_closed(self, session: Session) -> None:
        """Flush `session` after one of its agents closed; stop driving it when no agent is left on it.

        A session nothing may be written of (a read-only copy, one another host took over) is
        left as it is: its turns already said why they could not be written.
        """
        if session in self._refusals:
            return
        await self.flush(session)
        if session not in self._drivers and self._live.get(session.id) is session:
            self.forget(session.id)

    # -- stopping ------------------------------------------------------------------------------

    async def release(self, session_id: str) -> None:
        """Stop driving a session: flush it, give its lease up and forget it (another host may then drive it)."""
        session = self._live.get(session_id)
        if session is not None:
            await self.flush(session)
        self.forget(session_id)

    async def close(self) -> None:
        """Flush every live session, forget them, and give every lease up."""
        for session in list(self._live.values()):
            await self.flush(session)
        self._live.clear()
        self.release_leases()

    def forget(self, session_id: str) -> None:
        """Stop driving a session at once: its unflushed events are dropped and its lease given up."""
        self._live.pop(session_id, None)
        self._untitled.discard(session_id)
        self._flushing.pop(session_id, None)
        self._opening.pop(session_id, None)
        self._give_up_lease(session_id)

    def release_leases(self) -> None:
        """Give every lease up at once (the host does, closing without flushing)."""
        leases, self._leases = self._leases, {}
        for held in leases.values():
            held.release()


def append_out_of_band(session: Session, type: str, data: dict[str, JsonValue], trigger: dict[str, JsonValue]) -> None:
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
