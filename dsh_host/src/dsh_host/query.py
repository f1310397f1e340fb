"""The session query service (`host.services.session_query`): the read side of the store and sources.

A session live in this process is answered from memory; a session whose id carries a mounted
source's prefix from that source; others from the store, each read in one read transaction on
a worker thread so concurrent reads overlap and a caller can stop waiting for one (a late
result is simply dropped). Listings and candidate searches answer from the store and every
mounted source alike (`dsh_host.sources.ranking` puts their candidates in one order). A
synchronous caller (a command) lists sessions with `list_sessions_now`, which reads on its own
thread and needs no event loop.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, cast

from dsh_host.page_reads import (
    STORE_AGENT,
    activity,
    activity_order,
    check_limit,
    check_position,
    decode_cursor,
    encode_cursor,
    events_page_of,
    is_after,
    rows_by_activity,
    surface_page_of,
)
from dsh_host.paging import AgentInfo, InvalidPageRequest, SessionPage
from dsh_host.session.events import SessionHeader, SurfaceText, surface_text
from dsh_host.session.snapshots import EventsPage, SurfacePage, SurfaceSnapshot, SurfaceTexts
from dsh_host.sources.base import PagedSource
from dsh_host.sources.ranking import merge_candidates, store_scorer
from dsh_host.sources.registry import SessionSources
from dsh_host.store.base import (
    ActivityKey,
    CandidateRow,
    ListingKey,
    SessionNotFound,
    SessionRow,
    SessionStore,
)
from dsh_host.store.search import name_matches, name_needle
from dsh_host.titles import latest_title

if TYPE_CHECKING:
    # asyncio is imported where a coroutine needs it (it is loaded by then): a command that
    # only lists sessions never loads it.
    import asyncio

    from dsh_host.host import Host
    from dsh_host.jsontypes import Json, JsonValue
    from dsh_host.live_sessions import SessionRegistry
    from dsh_host.session.session import Session
    from dsh_host.sources.base import SessionSource
    from dsh_host.store.base import StoredTitle


class SessionRecord(NamedTuple):
    """A listed session: header fields, latest title, last activity, and where it lives.

    A named tuple (immutable, fields by name) because listing builds one per session: it is
    several times cheaper to build than a frozen dataclass. `last_activity_at` is the time of
    the session's last event (None when a session source does not say); `source` names the
    session source serving a session another agent keeps (None for dsh's own sessions), and
    `agent` the name a person knows that agent by (the source's display name, `Claude Code`).
    """

    id: str
    created_at: int | float
    cwd: str | None
    title: str | None
    last_activity_at: int | float | None
    live: bool
    persisted: bool
    source: str | None = None
    agent: str | None = None


@dataclass(frozen=True)
class TitleSnapshot:
    """A session's latest title: its text, the seq of its `session/title` event, and when it was set."""

    title: str
    event_seq: int
    updated_at: int


class SessionQuery:
    """Read sessions, live or persisted. Every method but `list_sessions_now` is a coroutine."""

    def __init__(
        self,
        sessions: Callable[[], SessionRegistry | None],
        store: Callable[[], SessionStore],
        sources: Callable[[], SessionSources] | None = None,
    ) -> None:
        """`sessions()` is the host's registry of live sessions, or None while it has made none
        (every session is then answered from the store or a source); `store()` opens the store
        on first use; `sources()` are the mounted session sources."""
        self._sessions = sessions
        self._store = store
        self._sources = sources if sources is not None else _no_sources

    def _live(self, session_id: str) -> Session | None:
        registry = self._sessions()
        return registry.get(session_id) if registry is not None else None

    def _live_sessions(self) -> list[Session]:
        registry = self._sessions()
        return registry.live() if registry is not None else []

    def _backend(self, session_id: str) -> SessionSource | SessionStore:
        """The source serving `session_id`, else the store (either opened here, on first use)."""
        source = self._sources().for_session(session_id)
        return source if source is not None else self._store()

    async def _read(self, operation: str, session_id: str) -> object:
        """Run a read of one session on a worker thread, on the source or store that has it."""
        import asyncio

        return await asyncio.to_thread(lambda: getattr(self._backend(session_id), operation)(session_id))

    def agent_name(self, session_id: str) -> str | None:
        """The name a person knows the agent keeping `session_id` by (`Claude Code`); None for dsh's own.

        The same name a listed session's `agent` carries: a view labels a session of another
        agent with it (`Claude Code · <title>`). It may open the session's source (a blocking call).
        """
        return self._sources().agent_name(session_id)

    async def list_sessions(self) -> list[SessionRecord]:
        """Every session of the store and the sources, newest first (ties by id, code-point order); reads no log."""
        import asyncio

        sources = self._sources()

        def list_source(name: str) -> list[SessionRow]:
            return sources.get(name).list_sessions()

        listings = [asyncio.to_thread(lambda: self._store().list_sessions())]
        listings += [asyncio.to_thread(list_source, name) for name in sources.names]
        rows, *by_source = await asyncio.gather(*listings)
        return self._records(rows, list(zip(sources.names, by_source, strict=True)))

    async def list_sessions_page(self, limit: int, after: ListingKey | None = None) -> list[SessionRecord]:
        """At most `limit` of `list_sessions`, in its order, from the first after `after`.

        `after` is the (`created_at`, `id`) of the last record of the previous page (None: from
        the newest). A page reads only its own rows of the store (`SessionStore.list_sessions_page`);
        a source's sessions come from its listing.
        """
        import asyncio

        sources = self._sources()

        def page_of_source(name: str) -> list[SessionRow]:
            rows = sources.get(name).list_sessions()
            return [row for row in rows if _after(row, after)][:limit]

        pages = [asyncio.to_thread(lambda: self._store().list_sessions_page(limit, after))]
        pages += [asyncio.to_thread(page_of_source, name) for name in sources.names]
        rows, *by_source = await asyncio.gather(*pages)
        live = [session for session in self._live_sessions() if _after(session.header, after)]
        # The store's page, merged with the live sessions and source rows past the same key,
        # holds the first `limit` of their union: any stored row past its page ranks after all
        # of it.
        return self._records(rows, list(zip(sources.names, by_source, strict=True)), live)[:limit]

    def list_sessions_now(self) -> list[SessionRecord]:
        """`list_sessions` for a synchronous caller: the store and sources are read on the calling thread."""
        sources = self._sources()
        by_source = [(name, sources.get(name).list_sessions()) for name in sources.names]
        return self._records(self._store().list_sessions(), by_source)

    def _records(
        self,
        rows: list[SessionRow],
        by_source: list[tuple[str, list[SessionRow]]],
        live: list[Session] | None = None,
    ) -> list[SessionRecord]:
        """The store's rows with live sessions (default: all) folded in, and each source's rows: newest first."""
        records = self._stored_records(rows, self._live_sessions() if live is None else live)
        if not by_source:
            return records
        records.extend(_source_records(self._sources(), by_source))
        return sorted(records, key=lambda r: (-r.created_at, r.id))

    @staticmethod
    def _stored_records(rows: list[SessionRow], live: list[Session]) -> list[SessionRecord]:
        """The store's rows with the given live sessions folded in, newest first."""
        if not live:  # the store's order already is newest first, ties by id
            make = SessionRecord._make
            return [make(row + _STORED) for row in rows]
        records = {r.id: SessionRecord(*r, live=False, persisted=True) for r in rows}
        for session in live:
            records[session.id] = live_record(session, persisted=session.id in records)
        return sorted(records.values(), key=lambda r: (-r.created_at, r.id))

    # -- paged reads (see `dsh_host.page_reads`) ------------------------------------------------

    async def list_page(
        self, *, agent: str | None = None, cwd: str | None = None, after: str | None = None, limit: int = 50
    ) -> SessionPage:
        """A page of the sessions of the store and the sources, newest last activity first (ties by id).

        `agent` is None for every session, `"dsh"` for the store's own, else a mounted source's
        name; `cwd` keeps the sessions of exactly that cwd; `after` is the previous page's
        `next`. Last activity is `last_activity_at`, or `created_at` where a source does not
        know it. The store and each source read only their rows of the page, on worker threads;
        this process's live sessions are folded in. `InvalidPageRequest` for a malformed cursor,
        an unknown agent or a limit out of range.
        """
        import asyncio

        reads = self._page_reads(agent, cwd, after, limit)
        done = await asyncio.gather(*(asyncio.to_thread(read) for read in reads.calls()))
        return reads.page(done)

    def list_page_now(
        self, *, agent: str | None = None, cwd: str | None = None, after: str | None = None, limit: int = 50
    ) -> SessionPage:
        """`list_page` for a synchronous caller: the store and sources are read on the calling thread."""
        reads = self._page_reads(agent, cwd, after, limit)
        return reads.page([read() for read in reads.calls()])

    def _page_reads(self, agent: str | None, cwd: str | None, after: str | None, limit: int) -> _PageReads:
        check_limit(limit)
        key = None if after is None else decode_cursor(after)
        with_store, names = self._listed(agent)
        live = self._live_sessions() if with_store else []
        return _PageReads(self._store if with_store else None, names, live, key, cwd, limit, self._sources())

    def _listed(self, agent: str | None) -> tuple[bool, tuple[str, ...]]:
        """Whether the store's sessions are listed, and the sources listed, for an `agent` filter."""
        names = self._sources().names
        if agent is None:
            return True, names
        if agent == STORE_AGENT:
            return True, ()
        if agent in names:
            return False, (agent,)
        known = ", ".join([STORE_AGENT, *names])
        raise InvalidPageRequest(f"unknown agent {agent!r} (known: {known})")

    async def list_agents(self) -> list[AgentInfo]:
        """The agents the listing can be filtered to: `dsh` first, then each mounted source in order."""
        import asyncio

        sources = self._sources()

        def agents() -> list[AgentInfo]:
            return [AgentInfo(STORE_AGENT, STORE_AGENT)] + [
                AgentInfo(name, sources.display_name(name)) for name in sources.names
            ]

        return await asyncio.to_thread(agents)

    async def list_cwds(self, *, agent: str | None = None) -> list[str]:
        """The distinct cwds of the sessions (of one agent, as `list_page` filters), in code-point order."""
        import asyncio

        with_store, names = self._listed(agent)
        sources = self._sources()
        found: set[str | None] = set()
        if with_store:
            found.update(session.header.cwd for session in self._live_sessions())

        def read() -> None:
            if with_store:
                found.update(self._store().list_cwds())
            for name in names:
                source = sources.get(name)
                if isinstance(source, PagedSource):
                    found.update(source.list_cwds())
                else:
                    found.update(row.cwd for row in source.list_sessions())

        await asyncio.to_thread(read)
        return sorted(cwd for cwd in found if cwd is not None)

    async def read_surface_page(self, session_id: str, *, before: int | None = None, limit: int = 50) -> SurfacePage:
        """The newest `limit` readable entries of the session's current surface before position `before`.

        Entries are user, assistant and steering messages with text, a compaction checkpoint
        one entry (`SurfaceEntry.kind`), in reading order; `before` is None for the newest page,
        else the previous page's `before`. The page carries the session's header and latest
        title as they were at the same read (a view of it reads nothing else). The store reads
        only the page's rows and the session's own row, in one transaction. Raises
        SessionNotFound for an unknown id, `InvalidPageRequest` for a bad `before` or limit.
        """
        import asyncio

        check_limit(limit)
        check_position("before", before)
        session = self._live(session_id)
        if session is not None:
            return live_surface_page(session, before, limit)
        return await asyncio.to_thread(self._surface_page, session_id, before, limit)

    def _surface_page(self, session_id: str, before: int | None, limit: int) -> SurfacePage:
        source = self._sources().for_session(session_id)
        if source is None:
            return self._store().read_surface_page(session_id, before, limit)
        if isinstance(source, PagedSource):
            return source.read_surface_page(session_id, before, limit)
        snapshot = source.read_surface(session_id)
        title = source.read_title(session_id)
        nodes = snapshot.events

        def node(position: int) -> tuple[int, int | float | None, SurfaceText]:
            event = nodes[position]
            time = event.get("time")
            return (
                cast(int, event.get("seq")),
                time if isinstance(time, int | float) else None,
                surface_text(cast(str, event.get("type")), event.get("data")),
            )

        return surface_page_of(
            snapshot.header,
            None if title is None else title.title,
            snapshot.captured_through_seq,
            len(nodes),
            node,
            before,
            limit,
        )

    async def read_events_page(self, session_id: str, *, before_seq: int | None = None, limit: int = 200) -> EventsPage:
        """The newest `limit` events of the session's full log with seq below `before_seq`, in seq order.

        Log form, as `read_events` gives them; `before_seq` is None for the newest page, else the
        previous page's `before_seq`. The store reads only the page's events; a source's
        session pages its synthesized log.
        """
        import asyncio

        check_limit(limit)
        check_position("before_seq", before_seq)
        session = self._live(session_id)
        if session is not None:
            events = session.events
            return events_page_of(session_id, len(events), lambda seq: events[seq].to_line(), before_seq, limit)
        return await asyncio.to_thread(self._events_page, session_id, before_seq, limit)

    def _events_page(self, session_id: str, before_seq: int | None, limit: int) -> EventsPage:
        source = self._sources().for_session(session_id)
        if source is None:
            return self._store().read_events_page(session_id, before_seq, limit)
        _, lines = source.read_lines(session_id)
        return events_page_of(session_id, len(lines), lines.__getitem__, before_seq, limit)

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
        """Sessions matching `query`, ranked, as the store's and every source's `search_candidates` find them.

        `group_by_cwd=False` ranks without the cwd groups (`target_cwd` is then ignored).

        The store and each source search on worker threads; setting `signal` (or cancelling the
        caller) stops them there promptly. Live sessions are matched by name from memory (their
        latest title may not be flushed yet, or the session not stored at all); their body
        matches are the store's, so text not yet flushed is not found. Store and source
        candidates come in one order (`dsh_host.sources.ranking`).
        """
        import asyncio

        live = [session for session in self._live_sessions() if session.id != target_id]
        sources = self._sources()
        cancel = threading.Event()
        watcher = None
        if signal is not None:
            if signal.is_set():
                cancel.set()
            watcher = asyncio.ensure_future(signal.wait())
            watcher.add_done_callback(lambda done: done.cancelled() or cancel.set())  # type: ignore[func-returns-value]

        def search_source(name: str) -> list[CandidateRow]:
            score = store_scorer(self._store())
            return sources.get(name).search_candidates(
                query,
                target_id=target_id,
                target_cwd=target_cwd,
                limit=limit,
                cancel=cancel,
                score=score,
                group_by_cwd=group_by_cwd,
            )

        searches = [
            asyncio.to_thread(
                lambda: self._store().search_candidates(
                    query,
                    target_id=target_id,
                    target_cwd=target_cwd,
                    limit=limit + len(live),
                    cancel=cancel,
                    group_by_cwd=group_by_cwd,
                )
            )
        ]
        searches += [asyncio.to_thread(search_source, name) for name in sources.names]
        try:
            rows, *by_source = await asyncio.gather(*searches)
        except asyncio.CancelledError:
            cancel.set()
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        if not live and not by_source:
            return rows[:limit]
        if live:
            rows = self._with_live(rows, live, query)
        scored = store_scorer(self._store()) is not None  # the store is open by now: it has searched
        return merge_candidates(rows, by_source, target_cwd, scored=scored, grouped=group_by_cwd)[:limit]

    def _with_live(self, rows: list[CandidateRow], live: list[Session], query: str) -> list[CandidateRow]:
        """The store's candidates with this process's live sessions matched by name from memory."""
        found = {row.id: row for row in rows}
        needle = name_needle(query)
        for session in live:
            header = session.header
            named = CandidateRow(
                session.id,
                header.created_at,
                header.cwd,
                live_title(session),
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
        return list(found.values())

    async def read_title(self, session_id: str) -> TitleSnapshot | None:
        """The latest title, or None; raises SessionNotFound for an unknown id."""
        session = self._live(session_id)
        if session is not None:
            title = latest_title(session.events)
            return None if title is None else TitleSnapshot(title["title"], title["eventSeq"], title["updatedAt"])
        stored = cast("StoredTitle | None", await self._read("read_title", session_id))
        return None if stored is None else TitleSnapshot(stored.title, stored.event_seq, stored.updated_at)

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, `captured_through_seq` and the current surface events of one observation."""
        session = self._live(session_id)
        if session is not None:
            return live_surface(session)
        stored = cast("SurfaceSnapshot", await self._read("read_surface", session_id))
        live = self._live(session_id)  # it may have come alive while we read
        return live_surface(live) if live is not None else stored

    async def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Several sessions' surfaces, each node as its `SurfaceText` (type, source, display text).

        For consumers that need only the conversation's text (session references): persisted
        sessions are answered from the text the store keeps per surface node, all of them in one
        read on one worker thread, so no event is decoded; live sessions from memory. Raises
        SessionNotFound for the first unknown id.
        """
        import asyncio

        sources = self._sources()
        groups: dict[str | None, list[str]] = {}
        for sid in session_ids:
            if self._live(sid) is None:
                groups.setdefault(sources.owner(sid), []).append(sid)

        def read_groups() -> list[SurfaceTexts]:
            out: list[SurfaceTexts] = []
            for name, ids in groups.items():
                backend = self._store() if name is None else sources.get(name)
                out.extend(backend.read_surface_texts(ids))
            return out

        stored: dict[str, SurfaceTexts] = {}
        if groups:
            for texts in await asyncio.to_thread(read_groups):
                stored[texts.header.id] = texts
        out = []
        for sid in session_ids:
            live = self._live(sid)  # a session may have come alive while we read
            out.append(live_surface_texts(live) if live is not None else stored[sid])
        return out

    async def read_events(self, session_id: str) -> list[dict[str, JsonValue]]:
        """Every event of the log, in log form, detached."""
        _, lines = await self.read_lines(session_id)
        return [json.loads(line) for line in lines]

    async def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event of the log as its JSON line (what `dsh sessions export`
        writes); raises SessionNotFound for an unknown id."""
        session = self._live(session_id)
        if session is not None:
            return session.header, [e.to_line() for e in session.events]
        return cast("tuple[SessionHeader, list[str]]", await self._read("read_lines", session_id))

    async def read_header(self, session_id: str) -> SessionHeader:
        session = self._live(session_id)
        if session is not None:
            return session.header
        return cast("SessionHeader", await self._read("read_header", session_id))


def last_activity(session: Session) -> int | float:
    """When a live session last logged an event (its creation time while it has none)."""
    events = session.events
    return events[-1].time if events else session.header.created_at


def live_title(session: Session) -> str | None:
    """A live session's latest title's text, None without one."""
    title = latest_title(session.events)
    return None if title is None else cast("str | None", title["title"])


def _after(session: SessionRow | SessionHeader, key: ListingKey | None) -> bool:
    """Whether `session` comes after `key` in the newest-first listing (everything does after None)."""
    return key is None or (-session.created_at, session.id) > (-key[0], key[1])


_STORED = (False, True, None, None)
"""The rest of a stored, not live, session's `SessionRecord` after its `SessionRow`: live, persisted, source, agent."""


def _source_records(sources: SessionSources, by_source: Iterable[tuple[str, list[SessionRow]]]) -> list[SessionRecord]:
    """Each source's rows as listed, with the source's name and its agent's display name."""
    records: list[SessionRecord] = []
    for name, rows in by_source:
        agent = sources.display_name(name)
        records.extend(
            SessionRecord(r.id, r.created_at, r.cwd, r.title, r.last_activity_at, False, False, name, agent)
            for r in rows
        )
    return records


def _source_by_activity(
    sources: SessionSources, name: str, limit: int, after: ActivityKey | None, cwd: str | None
) -> list[SessionRow]:
    """A source's rows of a listing page: its own page, or cut from its listing when it pages none."""
    source = sources.get(name)
    if isinstance(source, PagedSource):
        return source.list_sessions_by_activity(limit, after, cwd)
    return rows_by_activity(source.list_sessions(), limit, after, cwd)


@dataclass
class _PageReads:
    """The reads one listing page needs (the store's, unless filtered out, then each source's), and their merge.

    Each read gets the first `limit + 1` rows past the key (the store's more, for the live
    sessions it may drop), so the first `limit + 1` of their union are among them.
    """

    store: Callable[[], SessionStore] | None
    names: tuple[str, ...]
    live: list[Session]
    after: ActivityKey | None
    cwd: str | None
    limit: int
    sources: SessionSources
    persisted: set[str] = field(default_factory=set)
    """The live sessions the store holds (what the store's read found)."""

    def calls(self) -> list[Callable[[], list[SessionRow]]]:
        """The reads, each a blocking call: the store's first, then each source's in order."""
        calls: list[Callable[[], list[SessionRow]]] = [] if self.store is None else [self._read_store]
        for name in self.names:
            read = functools.partial(_source_by_activity, self.sources, name, self.limit + 1, self.after, self.cwd)
            calls.append(read)
        return calls

    def _read_store(self) -> list[SessionRow]:
        assert self.store is not None  # only called when the store is listed
        store = self.store()
        rows = store.list_sessions_by_activity(self.limit + 1 + len(self.live), self.after, self.cwd)
        listed = {row.id for row in rows}
        self.persisted = {s.id for s in self.live if s.id in listed or store.has(s.id)}
        return rows

    def page(self, done: list[list[SessionRow]]) -> SessionPage:
        """The page from the reads' rows (in the order of `calls`)."""
        records: list[SessionRecord] = []
        by_source = done
        if self.store is not None:
            stored, *by_source = done
            live_ids = {session.id for session in self.live}
            records.extend(SessionRecord._make(row + _STORED) for row in stored if row.id not in live_ids)
            for session in self.live:
                record = live_record(session, persisted=session.id in self.persisted)
                if (self.cwd is None or record.cwd == self.cwd) and is_after(record, self.after):
                    records.append(record)
        records.extend(_source_records(self.sources, zip(self.names, by_source, strict=True)))
        records.sort(key=activity_order)
        shown = tuple(records[: self.limit])
        more = len(records) > self.limit
        return SessionPage(shown, encode_cursor((activity(shown[-1]), shown[-1].id)) if more else None)


def live_record(session: Session, *, persisted: bool) -> SessionRecord:
    """A live session as listed, from memory."""
    header = session.header
    return SessionRecord(
        session.id,
        header.created_at,
        header.cwd,
        live_title(session),
        last_activity(session),
        live=True,
        persisted=persisted,
    )


def live_surface_page(session: Session, before: int | None, limit: int) -> SurfacePage:
    """A page of a live session's surface, from memory (positions are indexes into its current surface)."""
    nodes = session.surface.nodes

    def node(position: int) -> tuple[int, int | float | None, SurfaceText]:
        event = session.event(nodes[position])
        return event.seq, event.time, surface_text(event.type, event.data)

    last = session.seq - 1
    return surface_page_of(
        session.header, live_title(session), last if last >= 0 else None, len(nodes), node, before, limit
    )


def _no_sources() -> SessionSources:
    return _NO_SOURCES


_NO_SOURCES = SessionSources(cast("Host", None), {}, lambda name: {})  # no factory ever gets the host


def live_surface(session: Session) -> SurfaceSnapshot:
    """A detached snapshot of a live session, taken synchronously (never half a compaction)."""
    events = [json.loads(session.event(seq).to_line()) for seq in session.surface.nodes]
    last = session.seq - 1
    return SurfaceSnapshot(session.header, last if last >= 0 else None, events)


def texts_of(snapshot: SurfaceSnapshot) -> SurfaceTexts:
    """A surface snapshot as text (for query services that keep no text per node)."""
    texts = [surface_text(cast(str, event.get("type")), event.get("data")) for event in snapshot.events]
    return SurfaceTexts(snapshot.header, snapshot.captured_through_seq, texts)


def live_surface_texts(session: Session) -> SurfaceTexts:
    """The surface of a live session as text, taken synchronously."""
    texts = []
    for seq in session.surface.nodes:
        event = session.event(seq)
        texts.append(surface_text(event.type, event.data))
    last = session.seq - 1
    return SurfaceTexts(session.header, last if last >= 0 else None, texts)


def record_json(record: SessionRecord) -> Json:
    out: dict[str, JsonValue] = {"id": record.id, "createdAt": record.created_at}
    if record.cwd is not None:
        out["cwd"] = record.cwd
    out["title"] = record.title
    out["lastActivityAt"] = record.last_activity_at
    out["live"] = record.live
    out["persisted"] = record.persisted
    if record.source is not None:
        out["source"] = record.source
    if record.agent is not None:
        out["agent"] = record.agent
    return out


__all__ = ["SessionNotFound", "SessionQuery", "SessionRecord", "SurfaceSnapshot", "SurfaceTexts", "TitleSnapshot"]
