"""The store seam: what every session store does, its records and its errors.

A store persists session logs and answers the read side without replaying them. Stores are
registered through the `dsh_register_stores` hook and selected with `[host] store`; SQLite is
the embedded default. Every operation is synchronous: the host calls them from worker threads,
never on the event loop, so a store may block on I/O (and must be safe to call from several
threads at once).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from dsh_host.errors import DshError
from dsh_host.session.events import Event, SessionHeader
from dsh_host.session.snapshots import EventsPage, SurfacePage, SurfaceSnapshot, SurfaceTexts


def _quoted(session_id: str) -> str:
    """A session id as messages quote it (JSON, so any string reads unambiguously)."""
    return json.dumps(session_id, ensure_ascii=False)


class StoreError(DshError):
    """The store cannot be used (not ours, from the future, corrupt, closed, or a conflict)."""


class SessionNotFound(StoreError):
    """No session with that id (the message is the query contract: `session "<id>" not found`).

    Stores that enforce visibility raise it for a session the principal may not read, too, so a
    caller cannot tell a hidden session from a missing one.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {_quoted(session_id)} not found")
        self.session_id = session_id


class SessionBusy(StoreError):
    """Another host process drives the session: it holds the session's lease.

    Raised before anything is written, by whatever would drive the session (resuming it,
    flushing it, importing over it, deleting it). The message names the session and says that
    another dsh is driving it; `session_id` is the session's id.
    """

    def __init__(self, session_id: str, message: str | None = None) -> None:
        super().__init__(message or f"session {_quoted(session_id)} is being driven by another dsh")
        self.session_id = session_id

    @classmethod
    def after_waiting(cls, session_id: str, seconds: float) -> SessionBusy:
        """The refusal after waiting `seconds` for the lease in vain."""
        return cls(
            session_id, f"session {_quoted(session_id)} is still being driven by another dsh after {seconds:g} s"
        )

    @classmethod
    def taken_over(cls, session_id: str) -> SessionBusy:
        """The lease was lost (the store was unreachable) and another host took the session meanwhile."""
        return cls(
            session_id, f"session {_quoted(session_id)} was taken over by another dsh; this one stopped driving it"
        )


def id_not_available(session_id: str) -> StoreError:
    """The refusal of an id for a new session, whatever holds it.

    The same words whether a readable session, a session this role may not see, a live session or
    a driver holds the id: creating a session must not tell whether a hidden one exists.
    """
    return StoreError(f"session id {_quoted(session_id)} is not available")


class SessionRow(NamedTuple):
    """A session as listed: header fields, the latest title and the last activity, read without the log.

    `last_activity_at` is the time of the session's last stored event (milliseconds since the
    epoch), its `created_at` while it has none; a store always knows it, a session source may
    not (None). A named tuple rather than a frozen dataclass: listing builds one per session,
    and a tuple is several times cheaper to build.
    """

    id: str
    created_at: int | float
    cwd: str | None
    title: str | None
    last_activity_at: int | float | None = None


ListingKey = tuple[int | float, str]
"""Where a session sits in the newest-first listing: its (`created_at`, `id`)."""

ActivityKey = tuple[int | float, str]
"""Where a session sits in the listing by last activity: its (`last_activity_at`, `id`)."""


class SearchCancelled(StoreError):
    """A candidate search stopped because its `cancel` event was set (nothing is returned)."""


class CandidateRow(NamedTuple):
    """A session found by `search_candidates`, in rank order.

    `snippet` is None for a match on the id, title or cwd (or an empty query); for a match on
    the surface text it is a short excerpt around the match, raw (not yet terminal-safe). `score`
    is the body match's relevance (BM25, lower is better; 0.0 for the others).
    `last_activity_at` is as in `SessionRow` (last, with a default, so a session source that
    does not know it need not name it).
    """

    id: str
    created_at: int | float
    cwd: str | None
    title: str | None
    snippet: str | None
    score: float
    last_activity_at: int | float | None = None


@dataclass(frozen=True)
class StoredTitle:
    """The latest `session/title` of a session as the store keeps it."""

    title: str
    event_seq: int
    updated_at: int


@runtime_checkable
class SessionStore(Protocol):
    """The operations a session store provides (see `SqliteSessionStore` for the reference one).

    Writes: `append` persists one contiguous batch of a session in one transaction (the first
    batch, starting at seq 0, creates the session; a batch that does not start at the stored
    next seq is a `StoreError` and nothing of it is written); `import_log` stores a whole log
    (`replace=True` overwrites an existing session); `delete` removes a session.

    Reads: each answers from one consistent observation. `read_surface` and
    `read_surface_texts` cost time in proportion to the surface, not the log (log-only and
    shadowed events are not read); `list_sessions`, `list_sessions_page`,
    `list_sessions_by_activity`, `list_cwds` and `read_title` read no log; `read_surface_page` and
    `read_events_page` read only their page. An unknown id raises `SessionNotFound`.
    """

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Persist a contiguous batch of `header`'s session in one transaction."""
        ...

    def import_log(self, header: SessionHeader, events: Sequence[Event], *, replace: bool = False) -> None:
        """Store a whole log in one transaction; `StoreError` if it exists and not `replace`."""
        ...

    def delete(self, session_id: str) -> bool:
        """Remove a session; False when there was none."""
        ...

    def list_sessions(self) -> list[SessionRow]:
        """Every session the principal can read, newest first (ties by id), with its latest title."""
        ...

    def list_sessions_page(self, limit: int, after: ListingKey | None = None) -> list[SessionRow]:
        """At most `limit` of `list_sessions`, in its order, from the first one after `after`.

        `after` is the (`created_at`, `id`) of the last row of the previous page (None: from the
        newest). A page costs time in proportion to the rows it holds, wherever it starts.
        """
        ...

    def list_sessions_by_activity(
        self, limit: int, after: ActivityKey | None = None, cwd: str | None = None
    ) -> list[SessionRow]:
        """At most `limit` sessions, newest last activity first (ties by id), from the first after `after`.

        `after` is the (`last_activity_at`, `id`) of the last row of the previous page (None:
        from the newest); `cwd` keeps only the sessions of exactly that cwd. A page costs time
        in proportion to the rows it holds, wherever it starts.
        """
        ...

    def list_cwds(self) -> list[str]:
        """The distinct cwds of the sessions the principal can read (in no particular order)."""
        ...

    def has(self, session_id: str) -> bool:
        """Whether a session with this id is stored (and readable)."""
        ...

    def read_header(self, session_id: str) -> SessionHeader:
        """The session's header."""
        ...

    def search_candidates(
        self,
        query: str,
        *,
        target_id: str | None,
        target_cwd: str | None,
        limit: int,
        cancel: threading.Event | None = None,
        group_by_cwd: bool = True,
    ) -> list[CandidateRow]:
        """At most `limit` sessions matching `query`, ranked, computed by the store (no listing).

        A session matches on its name when the lower-cased query (`str.lower`) occurs in its
        id, cwd or latest title (an empty query matches every session), and on its body when
        every word of the query occurs in one message of its current surface as a
        session reference projects it: user and steering prompts from the user, compaction checkpoints
        and assistant text (never shadowed history, tool output, reasoning or injected
        context). The query is plain words: quotes, operators and control characters are
        never syntax. The session `target_id` is left out. Ranking: same cwd as `target_cwd`,
        then no cwd, then any other cwd (these groups only when `group_by_cwd`; otherwise
        `target_cwd` is ignored); within those, name matches before body matches, body matches
        by relevance; then newest first, ties by id. When `cancel` is set the search stops
        promptly with `SearchCancelled`.
        """
        ...

    def read_title(self, session_id: str) -> StoredTitle | None:
        """The latest title, or None when the session has none."""
        ...

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, last seq and the current surface events (log form), in one read."""
        ...

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Several sessions' surfaces as text, in order, observed at one instant."""
        ...

    def read_surface_page(self, session_id: str, before: int | None, limit: int) -> SurfacePage:
        """The newest `limit` readable entries of the surface before position `before` (None: the newest).

        Positions are the store's surface positions. It reads the page's nodes, not the surface,
        and the session's header and latest title in the same read transaction.
        """
        ...

    def read_events_page(self, session_id: str, before_seq: int | None, limit: int) -> EventsPage:
        """The newest `limit` events of the log with seq below `before_seq` (None: the newest), in seq order."""
        ...

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event's log line (compact JSON), in seq order, in one read."""
        ...

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        """The header and every event, in seq order, in one read."""
        ...

    def close(self) -> None:
        """Release connections; later calls raise `StoreError`."""
        ...


class SessionLease(Protocol):
    """The right to drive one session, held by one host process until released.

    A driver writes the session through its lease: `append` is the store's `append`, done only
    while the lease is held. A lease dies with the process that holds it (SIGKILL included), so
    a crashed driver never blocks the next one.
    """

    @property
    def session_id(self) -> str:
        """The leased session's id."""
        ...

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """`SessionStore.append` under the lease.

        A store whose lease can be lost while its process lives (a connection to a database
        server) takes it again here; `SessionBusy` when another host took the session meanwhile
        (nothing is written, and the lease is gone for good).
        """
        ...

    def release(self) -> None:
        """Give the lease up; calling it again does nothing."""
        ...


@runtime_checkable
class LeasingStore(SessionStore, Protocol):
    """A store that can keep two hosts from driving one session at once (an optional capability).

    The host takes a session's lease before it drives the session (resuming it, or the first
    flush of a new one) and writes the session through it. Reads never take a lease and are
    never blocked by one. While another process holds a session's lease, `delete` of it and
    `import_log(..., replace=True)` over it raise `SessionBusy`.
    """

    def lease(self, session_id: str, *, wait: float = 0.0) -> SessionLease:
        """Take `session_id`'s lease for this process (the session need not be stored yet).

        `SessionBusy` when another holder keeps it for longer than `wait` seconds (at once
        when `wait` is 0). A process holds at most one lease of a session: a second `lease` of
        it, even from the same process, is refused like anyone's.
        """
        ...


class QuickLease(SessionLease, Protocol):
    """The lease of a `QuickLeasingStore`: it also writes with `append_now`, the store's, under the lease."""

    def append_now(self, header: SessionHeader, events: Sequence[Event]) -> bool:
        """`QuickLeasingStore.append_now` under the lease."""
        ...


@runtime_checkable
class QuickLeasingStore(LeasingStore, Protocol):
    """A leasing store whose short writes may run on an event loop's own thread (an optional capability).

    Handing a write to a worker thread costs about as much as writing a short batch, so the host
    writes on its event loop's thread what such a store can write without waiting: `lease` with
    `wait=0` makes only quick local calls (no network round trip, no sleep), and the host writes
    through a lease's `append_now` first, falling back to `append` on a worker thread.
    """

    def append_now(self, header: SessionHeader, events: Sequence[Event]) -> bool:
        """`append` on the calling thread when it cannot wait on anything; whether it was done.

        False, with nothing written, when the write would have to wait (on another writer, on a
        sync to disk) or is too large to be quick: the caller then calls `append` from a worker
        thread. Errors are `append`'s.
        """
        ...

    def lease(self, session_id: str, *, wait: float = 0.0) -> QuickLease:
        """`LeasingStore.lease`; with `wait=0` it may be called on an event loop's thread."""
        ...
