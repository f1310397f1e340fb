"""The session query service (`host.services.session_query`): the read side of the store.

A session live in this process is answered from memory; others from the store, each read in
one read transaction on a worker thread so concurrent reads overlap and a caller can stop
waiting for one (a late result is simply dropped).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from dsh_host.session.events import SessionHeader, surface_text
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts
from dsh_host.store.base import CandidateRow, ListingKey, SessionNotFound, SessionRow, SessionStore
from dsh_host.store.search import name_matches, name_needle, rank_key
from dsh_host.titles import latest_title

if TYPE_CHECKING:
    from dsh_host.live_sessions import SessionRegistry
    from dsh_host.session.session import Session


class SessionRecord(NamedTuple):
    """A listed session: header fields, latest title, last activity, and where it lives.

    A named tuple (immutable, fields by name) because listing builds one per session: it is
    several times cheaper to build than a frozen dataclass.
    """

    id: str
    created_at: int | float
    cwd: str | None
    title: str | None
    last_activity_at: int | float
    live: bool
    persisted: bool


@dataclass(frozen=True)
class TitleSnapshot:
    """A session's latest title: its text, the seq of its `session/title` event, and when it was set."""

    title: str
    event_seq: int
    updated_at: int


class SessionQuery:
    """Read sessions, live or persisted. All methods are coroutines."""

    def __init__(self, sessions: SessionRegistry, store: Callable[[], SessionStore]) -> None:
        self._sessions = sessions
        self._store = store

    def _live(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    async def _read(self, operation: str, *args: Any) -> Any:
        """Run a store read on a worker thread (the store is opened there too, on first use)."""
        return await asyncio.to_thread(lambda: getattr(self._store(), operation)(*args))

    async def list_sessions(self) -> list[SessionRecord]:
        """Every session, newest first (ties by id, code-point order); reads no log."""
        return self._with_live(await self._read("list_sessions"), self._sessions.live())

    async def list_sessions_page(self, limit: int, after: ListingKey | None = None) -> list[SessionRecord]:
        """At most `limit` of `list_sessions`, in its order, from the first after `after`.

        `after` is the (`created_at`, `id`) of the last record of the previous page (None: from
        the newest); a page reads only its own rows of the store (see `SessionStore.list_sessions_page`).
        """
        live = [s for s in self._sessions.live() if after is None or _listing_key(s.header) > _listing_key(after)]
        # The store's page, merged with the live sessions past the same key, holds the first
        # `limit` of their union: any stored row past its page ranks after all of it.
        rows = await self._read("list_sessions_page", limit, after)
        return self._with_live(rows, live)[:limit]

    @staticmethod
    def _with_live(rows: list[SessionRow], live: list[Session]) -> list[SessionRecord]:
        """Stored rows (newest first) as records, the live sessions merged in, in listing order."""
        if not live:  # the store's order already is newest first, ties by id
            stored, make = (False, True), SessionRecord._make
            return [make(row + stored) for row in rows]
        records = {r.id: SessionRecord(*r, live=False, persisted=True) for r in rows}
        for session in live:
            title = latest_title(session.events)
            records[session.id] = SessionRecord(
                session.id,
                session.header.created_at,
                session.header.cwd,
                title["title"] if title else None,
                last_activity(session),
                live=True,
                persisted=session.id in records,
            )
        return sorted(records.values(), key=lambda r: (-r.created_at, r.id))

    async def search_candidates(
        self,
        query: str,
        *,
        target_id: str | None,
        target_cwd: str | None,
        limit: int,
        signal: asyncio.Event | None = None,
        group_by_cwd: bool = True,
    ) -> list[CandidateRow]:
        """Sessions matching `query`, ranked, as the store's `search_candidates` finds them.

        `group_by_cwd=False` ranks without the cwd groups (`target_cwd` is then ignored).

        The store searches on a worker thread; setting `signal` (or cancelling the caller)
        stops it there promptly. Live sessions are matched by name from memory (their latest
        title may not be flushed yet, or the session not stored at all); their body matches
        are the store's, so text not yet flushed is not found.
        """
        live = [session for session in self._sessions.live() if session.id != target_id]
        cancel = threading.Event()
        watcher = None
        if signal is not None:
            if signal.is_set():
                cancel.set()
            watcher = asyncio.ensure_future(signal.wait())
            watcher.add_done_callback(lambda done: done.cancelled() or cancel.set())
        try:
            rows = await asyncio.to_thread(
                lambda: self._store().search_candidates(
                    query,
                    target_id=target_id,
                    target_cwd=target_cwd,
                    limit=limit + len(live),
                    cancel=cancel,
                    group_by_cwd=group_by_cwd,
                )
            )
        except asyncio.CancelledError:
            cancel.set()
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        if not live:
            return rows[:limit]
        found = {row.id: row for row in rows}
        needle = name_needle(query)
        for session in live:
            title = latest_title(session.events)
            header = session.header
            named = CandidateRow(
                session.id,
                header.created_at,
                header.cwd,
                title["title"] if title else None,
                None,
                0.0,
                last_activity(session),
            )
            stored = found.get(session.id)
            if name_matches(needle, named.id, named.cwd, named.title):
                found[session.id] = named
            elif stored is not None and stored.snippet is None:
                del found[session.id]  # it matched on a name it no longer has
            elif stored is not None:
                found[session.id] = stored._replace(title=named.title, last_activity_at=named.last_activity_at)
        return sorted(found.values(), key=lambda row: rank_key(row, target_cwd, group_by_cwd))[:limit]

    async def read_title(self, session_id: str) -> TitleSnapshot | None:
        """The latest title, or None; raises SessionNotFound for an unknown id."""
        session = self._live(session_id)
        if session is not None:
            title = latest_title(session.events)
            return None if title is None else TitleSnapshot(title["title"], title["eventSeq"], title["updatedAt"])
        stored = await self._read("read_title", session_id)
        return None if stored is None else TitleSnapshot(stored.title, stored.event_seq, stored.updated_at)

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, `captured_through_seq` and the current surface events of one observation."""
        session = self._live(session_id)
        if session is not None:
            return live_surface(session)
        stored = await self._read("read_surface", session_id)
        live = self._live(session_id)  # it may have come alive while we read
        return live_surface(live) if live is not None else stored

    async def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Several sessions' surfaces, each node as its `SurfaceText` (type, source, display text).

        For consumers that need only the conversation's text (session references): persisted
        sessions are answered from the text the store keeps per surface node, all of them in one
        read on one worker thread, so no event is decoded; live sessions from memory. Raises
        SessionNotFound for the first unknown id.
        """
        stored_ids = [sid for sid in session_ids if self._live(sid) is None]
        stored: dict[str, SurfaceTexts] = {}
        if stored_ids:
            for texts in await self._read("read_surface_texts", stored_ids):
                stored[texts.header.id] = texts
        out = []
        for sid in session_ids:
            live = self._live(sid)  # a session may have come alive while we read
            out.append(live_surface_texts(live) if live is not None else stored[sid])
        return out

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """Every event of the log, in log form, detached."""
        session = self._live(session_id)
        if session is not None:
            return [json.loads(e.to_line()) for e in session.events]
        _, lines = await self._read("read_lines", session_id)
        return [json.loads(line) for line in lines]

    async def read_header(self, session_id: str) -> SessionHeader:
        session = self._live(session_id)
        if session is not None:
            return session.header
        return await self._read("read_header", session_id)


def last_activity(session: Session) -> int | float:
    """When a live session last logged an event (its creation time while it has none)."""
    events = session.events
    return events[-1].time if events else session.header.created_at


def _listing_key(session: SessionHeader | ListingKey) -> tuple[float, str]:
    """A session's position in the newest-first listing as an ascending sort key."""
    created_at, session_id = (session.created_at, session.id) if isinstance(session, SessionHeader) else session
    return (-created_at, session_id)


def live_surface(session: Session) -> SurfaceSnapshot:
    """A detached snapshot of a live session, taken synchronously (never half a compaction)."""
    events = [json.loads(session.event(seq).to_line()) for seq in session.surface.nodes]
    last = session.seq - 1
    return SurfaceSnapshot(session.header, last if last >= 0 else None, events)


def texts_of(snapshot: SurfaceSnapshot) -> SurfaceTexts:
    """A surface snapshot as text (for query services that keep no text per node)."""
    texts = [surface_text(event.get("type"), event.get("data")) for event in snapshot.events]
    return SurfaceTexts(snapshot.header, snapshot.captured_through_seq, texts)


def live_surface_texts(session: Session) -> SurfaceTexts:
    """The surface of a live session as text, taken synchronously."""
    texts = []
    for seq in session.surface.nodes:
        event = session.event(seq)
        texts.append(surface_text(event.type, event.data))
    last = session.seq - 1
    return SurfaceTexts(session.header, last if last >= 0 else None, texts)


def record_json(record: SessionRecord) -> Mapping[str, Any]:
    out: dict[str, Any] = {"id": record.id, "createdAt": record.created_at}
    if record.cwd is not None:
        out["cwd"] = record.cwd
    out["title"] = record.title
    out["lastActivityAt"] = record.last_activity_at
    out["live"] = record.live
    out["persisted"] = record.persisted
    return out


__all__ = ["SessionNotFound", "SessionQuery", "SessionRecord", "SurfaceSnapshot", "SurfaceTexts", "TitleSnapshot"]
