"""The source seam: what a session source answers, its report records and its refusal.

A source reads the sessions another agent keeps (files it owns and dsh never changes) and
presents each as a dsh session: a header and a log synthesized from its current conversation
(`dsh_host.sources.synthesis`). It answers the read half of `SessionStore` with the same
semantics, under session ids `<source name>:<the agent's own id>`; the host routes every id
carrying a mounted source's prefix to it. Like a store's, its operations are synchronous and
called from worker threads, several at once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dsh_host.progress import report_progress
from dsh_host.session.events import Event, SessionHeader
from dsh_host.session.snapshots import SurfacePage, SurfaceSnapshot, SurfaceTexts
from dsh_host.store.base import ActivityKey, CandidateRow, SessionRow, StoredTitle, StoreError

BodyScorer = Callable[[str, Sequence[str]], "list[float] | None"]
"""`score(query, texts)`: the relevance the store's body search gives each text for `query`.

The query service passes one to every source's `search_candidates` when its store can score a
text it does not hold on its own scale (`SessionStore`s with `score_body_texts`): the source
then ranks its body matches by it, so store and source matches compare by one measure. It
returns None when the store has nothing to compare with (its index is empty).
"""


class SourceReadOnly(StoreError):
    """A write, import, compaction or delete aimed at a session a read-only source serves."""

    def __init__(self, session_id: str, source: str) -> None:
        super().__init__(
            f"session {json.dumps(session_id, ensure_ascii=False)} belongs to the read-only source "
            f"{source!r}: dsh reads it but never writes, compacts, imports over or deletes it"
        )
        self.session_id = session_id
        self.source = source


@dataclass(frozen=True)
class SourceFileReport:
    """One file of a source that had lines it could not read (what `dsh sessions check` reports).

    `skipped` counts every line left out (not JSON, cut short by a crash, not an object);
    `oversized` how many of those were longer than the source reads, skipped without being read.
    `session_id` is the session the file holds, or None for a file that is no session.
    """

    path: str
    session_id: str | None
    skipped: int
    oversized: int = 0


@runtime_checkable
class SessionSource(Protocol):
    """The read half of `SessionStore`, for sessions another agent keeps (see `SessionStore`).

    Every id it is given or returns carries its `<name>:` prefix. Reads answer from one
    observation of the agent's file; a session whose file vanished or became unreadable is
    `SessionNotFound`, and bad lines never stop a listing or a read. `search_candidates` ranks
    as the store's does; with `score` given, body matches carry its relevance.

    A source may also have a `display_name` attribute: the name a person knows its agent by
    (`Claude Code`), which the `@` menu, `dsh sessions list`, `dsh mcp` and any other view show
    beside its sessions. Without one, the name it is registered under stands for it.
    """

    def list_sessions(self) -> list[SessionRow]:
        """Every session of the source, newest first (ties by id), with its title and, if known, last activity."""
        ...

    def has(self, session_id: str) -> bool:
        """Whether the source serves a session with this id."""
        ...

    def read_header(self, session_id: str) -> SessionHeader:
        """The session's header."""
        ...

    def read_title(self, session_id: str) -> StoredTitle | None:
        """The session's title as the agent keeps it, or None."""
        ...

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, last seq and the current surface events (log form), in one read."""
        ...

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Several sessions' surfaces as text, in order."""
        ...

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event's log line of the synthesized log."""
        ...

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        """The header and every event of the synthesized log."""
        ...

    def search_candidates(
        self,
        query: str,
        *,
        target_id: str | None,
        target_cwd: str | None,
        limit: int,
        cancel: threading.Event | None = None,
        score: BodyScorer | None = None,
        group_by_cwd: bool = True,
    ) -> list[CandidateRow]:
        """At most `limit` of its sessions matching `query`, ranked (see `SessionStore.search_candidates`).

        Without `group_by_cwd` the cwd groups do not rank (`SearchQuery.rank_key(row, target_cwd,
        grouped)` ranks either way).
        """
        ...

    def check(self, session_id: str | None = None) -> list[SourceFileReport]:
        """The files (of one session, or all) that had lines the source could not read."""
        ...

    def close(self) -> None:
        """Release what the source holds (its index connections)."""
        ...


@runtime_checkable
class PagedSource(Protocol):
    """A `SessionSource` that answers pages itself (optional, checked with `isinstance`).

    Without it the query service pages what `list_sessions` and `read_surface` answer, which is
    right but reads the whole listing or conversation for each page. The methods mean what the
    `SessionStore` methods of the same names do; a source that does not know a session's last
    activity orders it by its `created_at`. Surface positions are the source's own.
    """

    def list_sessions_by_activity(
        self, limit: int, after: ActivityKey | None = None, cwd: str | None = None
    ) -> list[SessionRow]:
        """At most `limit` sessions, newest last activity first (ties by id), from the first after `after`."""
        ...

    def list_cwds(self) -> list[str]:
        """The distinct cwds of the source's sessions."""
        ...

    def read_surface_page(self, session_id: str, before: int | None, limit: int) -> SurfacePage:
        """The newest `limit` readable entries of the conversation before position `before` (None: the newest),
        with the session's header and latest title."""
        ...


@runtime_checkable
class SourceProblems(Protocol):
    """A source that can say what is wrong with how it is set up (optional, checked with `isinstance`).

    `dsh config` shows the lines as notes and `dsh sessions check` reports them.
    """

    def problems(self) -> list[str]:
        """One line per problem a person should fix (a configured folder that does not exist), found without
        reading the agent's files; empty when there is none."""
        ...


@dataclass(frozen=True)
class IndexProgress:
    """How far a source's index of the agent's files has come.

    `files_done` of `files_total` files and `bytes_done` of `bytes_total` bytes that the build
    in progress (or the last one) had to read; the totals count only what changed since the
    index last saw it, so a warm index is `0 of 0`. `building` says whether a build is running
    now, in this process or another one; `complete` whether every file as last listed is read;
    `index_bytes` the size of the index on disk.
    """

    files_done: int = 0
    files_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    building: bool = False
    complete: bool = False
    index_bytes: int = 0


@runtime_checkable
class IndexedSource(Protocol):
    """A `SessionSource` that keeps an index of the agent's files and can say how far it is.

    Optional: the host checks for it with `isinstance` and drives it where a person or a client
    would otherwise wait in silence (progress on a terminal, `dsh sessions index`, the `@` menu,
    `dsh mcp`). A source without it is read as it answers.
    """

    def index_progress(self) -> IndexProgress:
        """Where the index stands now (cheap: no file is read)."""
        ...

    def build_index(self, *, background: bool = False, cancel: threading.Event | None = None) -> IndexProgress:
        """Bring the index up to date with the agent's files.

        In the foreground it returns when the index is current, or at once when another process
        is building it (reads then answer from what that build has committed); it reports its
        progress on the `dsh.progress` logger (`dsh_host.progress`). With `background` it starts
        a build in a thread (or keeps the one running) and returns at once; from then on the
        source's listings and searches answer from what is indexed instead of waiting for the
        build, and a read of a session not indexed yet reads that one session's files. `cancel`
        stops a foreground build between records. Either way it returns `index_progress()`.
        """
        ...


def report_index_progress(task: str, progress: IndexProgress) -> None:
    """Log a source's build progress on `dsh.progress` (files as the items, and bytes), for a front end to draw."""
    report_progress(
        task,
        progress.files_done,
        progress.files_total,
        bytes_done=progress.bytes_done,
        bytes_total=progress.bytes_total,
    )
