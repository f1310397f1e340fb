"""`AgentSource`: one agent's sessions as a read-only `dsh_host.SessionSource` (`TranscriptSource` for JSONL files).

Every answer comes from the index (`index.SourceIndex`), never from parsing a whole file again:
a listing or search first brings the index up to date (`build.Builder`: only files that changed
are read, and those that grew only where they grew), and a read of one session brings that
session's file up to date, then reads its stored messages. In the background (the terminal UI,
`dsh mcp`: `build_index(background=True)`) the build runs in a thread and listings and searches
answer at once from what is indexed so far, while a read of a session not indexed yet reads that
one session's file itself.

How the index is brought up to date depends on how the agent keeps its sessions (`Updates`):
one session a file (`TranscriptSource`, whose `FileUpdates` is the `build.Builder` of JSONL
transcripts), or many sessions in one store such as a database (`stores.StoreUpdates`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import weakref
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from dsh_host import (
    CandidateRow,
    SessionHeader,
    SessionNotFound,
    SessionRow,
    StoredTitle,
    SurfaceText,
    display_inline_text,
)
from dsh_host.settings import read_str, reject_unknown
from dsh_host.sources import (
    BodyScorer,
    IndexProgress,
    SearchQuery,
    SourceConversation,
    SourceFileReport,
    report_index_progress,
    surface_page,
)
from dsh_sources.build import Builder, end_idle_workers
from dsh_sources.index import FileRead, SessionEntry, SourceIndex, index_path
from dsh_sources.lines import ReadCancelled
from dsh_sources.reading import commit, read_file, unchanged
from dsh_sources.stores import StoreUpdates
from dsh_sources.transcript import AgentFormat, StoreFormat, TranscriptFormat

if TYPE_CHECKING:
    import asyncio

    from dsh_host import Agent, Event, Host, SurfaceSnapshot, SurfaceTexts
    from dsh_host.hookspecs import SourceFactory
    from dsh_host.paging import SurfacePage
    from dsh_host.ui import AtToken, MentionCompletion

_INTERACTIVE: weakref.WeakSet[Host] = weakref.WeakSet()
"""Hosts running the terminal UI: their sources index in the background."""

RECHECK_SECONDS = 1.0
"""A listing or search trusts an index whose files were all checked less than this long ago (a burst of
calls, as the `@` menu and `dsh mcp` make, stats the agents' files once)."""


class Updates(Protocol):
    """How a source brings its index up to date: a whole build, or the files of some sessions."""

    progress: IndexProgress
    """How far the build in this process is."""

    def run(self, cancel: threading.Event, report: Callable[[IndexProgress], None]) -> bool:
        """Build now; False when another process is the builder or `cancel` came first."""
        ...

    def update(self, paths: list[str], cancel: threading.Event) -> bool:
        """Read what changed of these files and forget those that are gone; whether the index changed."""
        ...

    def reports(self, agent_id: str | None) -> list[tuple[str, str | None, int, int]]:
        """(path, agent id, skipped, oversized) of what was left out (of one session's files, or all)."""
        ...

    def problems(self) -> list[str]:
        """Files the last reads could not read at all, one line each (from the index: nothing is read)."""
        ...

    def rank(self, path: str) -> int:
        """Of two files holding one session, the one of higher rank serves it (then the one active last)."""
        ...


class FileUpdates(Builder):
    """The `Updates` of an agent keeping one session a file (`TranscriptFormat`): builds, and reads of single files."""

    def update(self, paths: list[str], cancel: threading.Event) -> bool:
        gone: list[str] = []
        reads: list[FileRead] = []
        for path in paths:
            entry = self.index.file(path)
            try:
                if entry is None or not unchanged(entry, os.stat(path)):
                    reads.append(read_file(self.format, path, entry, self.index, cancel))
            except FileNotFoundError:
                gone.append(path)
            except (OSError, ReadCancelled):
                continue
        if reads:
            commit(self.format, self.index, reads, cancel)
        if gone:
            self.index.forget(gone)
        return bool(reads or gone)

    def reports(self, agent_id: str | None) -> list[tuple[str, str | None, int, int]]:
        return self.index.reports(agent_id)

    def problems(self) -> list[str]:
        return []

    def rank(self, path: str) -> int:
        return 0


class AgentSource:
    """The sessions of one agent (`fmt`), indexed in `index` and kept up to date by `updates`, under ids
    `<name>:<agent id>`.

    `display_name` is the name a person knows the agent by (`Claude Code`; default: `name`).
    """

    def __init__(
        self,
        name: str,
        fmt: AgentFormat,
        index: SourceIndex,
        updates: Updates,
        *,
        background: bool = False,
        display_name: str | None = None,
        configured: Path | None = None,
    ) -> None:
        self.name = name
        self._configured = configured
        self.display_name = display_name or name
        self.format = fmt
        self.index = index
        self._prefix = name + ":"
        self._background = background
        self._builder = updates
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._complete_before = False
        """Whether the index was complete when the running background build started (it records its own
        progress from then on, so what was recorded before is read at its start)."""
        self._closed = threading.Event()
        self._checked = -float("inf")
        self._cache: tuple[int, dict[str, SessionEntry], _Names, dict[int, str]] | None = None
        self._by_activity: tuple[int, list[SessionRow], list[tuple[int, str]]] | None = None

    # -- the index ---------------------------------------------------------------------------

    def build_index(self, *, background: bool = False, cancel: threading.Event | None = None) -> IndexProgress:
        """Bring the index up to date now, or (`background`) in a thread from now on (see `IndexedSource`)."""
        if background:
            self._background = True
            self._start_thread()
        elif not self._building_here():
            started = time.monotonic()
            if self._builder.run(cancel or self._closed, self._report):
                self._checked = started
        return self.index_progress()

    def index_progress(self) -> IndexProgress:
        here = self._building_here()
        progress = self._builder.progress if here else self.index.recorded_build() or IndexProgress()
        return replace(progress, index_bytes=self.index.size())

    def _building_here(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _start_thread(self) -> None:
        with self._thread_lock:
            if self._closed.is_set() or self._building_here():
                return
            # Building from now on, as far as anyone asking is told (the thread sets its totals once it has listed).
            recorded = self.index.recorded_build()
            self._complete_before = recorded is not None and recorded.complete
            self._builder.progress = IndexProgress(building=True)
            self._thread = threading.Thread(
                target=self._build_in_background, name=f"dsh-sources-{self.name}", daemon=True
            )
            self._thread.start()

    def _build_in_background(self) -> None:
        started = time.monotonic()
        try:
            with contextlib.suppress(Exception):  # a failed build leaves the index as it was; the next one tries again
                if self._builder.run(self._closed, self._report):
                    self._checked = started
        finally:
            self._builder.progress = replace(self._builder.progress, building=False)

    def _report(self, progress: IndexProgress) -> None:
        if not self._background:
            report_index_progress(f"indexing {self.name} sessions", progress)

    def _fresh(self, recheck: float = 0.0) -> None:
        """Bring the index up to date unless checked in the last `recheck` seconds (in the background: start it)."""
        if recheck and time.monotonic() - self._checked < recheck:
            return
        if self._background:
            self._start_thread()
        else:
            self.build_index()

    def refresh(self) -> None:
        """Check every file now, however recent the last check (in the background: start a build)."""
        self._fresh()

    def _sessions(self) -> tuple[dict[str, SessionEntry], _Names, dict[int, str]]:
        """The indexed sessions by full id (one file per agent id: the one `_serves` ranks first)."""
        stamp = self.index.stamp()
        cache = self._cache
        if cache is not None and cache[0] == stamp:
            return cache[1], cache[2], cache[3]
        chosen: dict[str, SessionEntry] = {}
        for entry in self.index.sessions():
            held = chosen.get(entry.agent_id)
            if held is None or self._serves(entry) > self._serves(held):
                chosen[entry.agent_id] = entry
        titles = self.format.titles()
        entries = {self._prefix + agent_id: _titled(entry, titles) for agent_id, entry in chosen.items()}
        names = _Names(entries)
        by_pk = {entry.pk: sid for sid, entry in entries.items()}
        self._cache = (stamp, entries, names, by_pk)
        return entries, names, by_pk

    def _entry(self, session_id: str) -> SessionEntry:
        """The session's entry, its file(s) brought up to date first (read now when not indexed yet)."""
        if not session_id.startswith(self._prefix):
            raise SessionNotFound(session_id)
        agent_id = session_id[len(self._prefix) :]
        found = self.index.sessions_of(agent_id)
        if self._builder.update([entry.path for entry in found] or self.format.locate(agent_id), self._closed):
            found = self.index.sessions_of(agent_id)
        if not found:
            raise SessionNotFound(session_id)
        return _titled(max(found, key=self._serves), self.format.titles())

    def _serves(self, entry: SessionEntry) -> tuple[int, int, str]:
        """Of the files holding one agent session, the greatest serves it: the store of higher rank, then the
        one active last (ties: the path)."""
        return self._builder.rank(entry.path), entry.updated_at, entry.path

    # -- reads -------------------------------------------------------------------------------

    def _conversation(self, session_id: str) -> SourceConversation:
        entry = self._entry(session_id)
        messages = tuple(said.message for said in self.index.messages(entry.pk))
        header = _header(session_id, entry)
        return SourceConversation(header, messages, self.format.provider)

    def list_sessions(self) -> list[SessionRow]:
        self._fresh(RECHECK_SECONDS)
        entries = self._sessions()[0]
        rows = [_row(sid, entry) for sid, entry in entries.items()]
        return sorted(rows, key=lambda row: (-row.created_at, row.id))

    def list_sessions_by_activity(
        self, limit: int, after: tuple[int | float, str] | None = None, cwd: str | None = None
    ) -> list[SessionRow]:
        """A page of the sessions, newest last activity first (see `dsh_host.sources.PagedSource`).

        The order is kept per index stamp, so a page finds where it starts by bisection.
        """
        self._fresh(RECHECK_SECONDS)
        rows, keys = self._activity_order()
        start = 0 if after is None else bisect_right(keys, (-after[0], after[1]))
        if cwd is None:
            return rows[start : start + limit]
        out: list[SessionRow] = []
        for row in rows[start:]:
            if row.cwd == cwd:
                out.append(row)
                if len(out) == limit:
                    break
        return out

    def _activity_order(self) -> tuple[list[SessionRow], list[tuple[int, str]]]:
        entries = self._sessions()[0]
        stamp = self._cache[0] if self._cache is not None else -1
        held = self._by_activity
        if held is not None and held[0] == stamp:
            return held[1], held[2]
        order = sorted(entries.items(), key=lambda item: (-item[1].updated_at, item[0]))
        rows = [_row(sid, entry) for sid, entry in order]
        keys = [(-e.updated_at, sid) for sid, e in order]
        self._by_activity = (stamp, rows, keys)
        return rows, keys

    def list_cwds(self) -> list[str]:
        """The distinct cwds of the indexed sessions."""
        self._fresh(RECHECK_SECONDS)
        return list({e.cwd for e in self._sessions()[0].values() if e.cwd is not None})

    def read_surface_page(self, session_id: str, before: int | None, limit: int) -> SurfacePage:
        """A page of the conversation, read from the index's messages of that page (see `PagedSource`)."""
        entry = self._entry(session_id)
        count = entry.messages

        def fetch(at: int | None, wanted: int) -> list[tuple[int, int, int, SurfaceText]]:
            stop = count if at is None else min(at, count)
            start = max(0, stop - wanted)
            said = self.index.messages(entry.pk, start, stop)
            return [
                (position, position, max(0, s.message.time), s.message.surface_text())
                for position, s in reversed(list(enumerate(said, start)))
            ]

        return surface_page(_header(session_id, entry), entry.title, count - 1 if count else None, fetch, before, limit)

    def has(self, session_id: str) -> bool:
        try:
            self._entry(session_id)
        except SessionNotFound:
            return False
        return True

    def read_header(self, session_id: str) -> SessionHeader:
        entry = self._entry(session_id)
        return _header(session_id, entry)

    def read_title(self, session_id: str) -> StoredTitle | None:
        entry = self._entry(session_id)
        return None if entry.title is None else StoredTitle(entry.title, max(entry.messages - 1, 0), entry.updated_at)

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        return self._conversation(session_id).surface()

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        return [self._conversation(session_id).texts() for session_id in session_ids]

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        conversation = self._conversation(session_id)
        return conversation.header, conversation.lines()

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        conversation = self._conversation(session_id)
        return conversation.header, conversation.events()

    def check(self, session_id: str | None = None) -> list[SourceFileReport]:
        if session_id is None:
            self.refresh()
            rows = self._builder.reports(None)
        else:
            rows = self._builder.reports(self._entry(session_id).agent_id)
        return [
            SourceFileReport(path, None if agent is None else self._prefix + agent, skipped, over)
            for path, agent, skipped, over in rows
        ]

    # -- search ------------------------------------------------------------------------------

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
        """Name matches from the index's rows, body matches from its full-text index (see `SessionSource`).

        With `score`, the body matches that make the list are scored again on its scale.
        """
        self._fresh(RECHECK_SECONDS)
        terms = SearchQuery(query)
        sessions, names, by_pk = self._sessions()
        needle = terms.needle
        rank = terms.rank_key
        if "\0" in needle:
            named = [sid for sid, e in sessions.items() if terms.matches_name(sid, e.cwd, e.title)]
        else:
            named = names.matching(needle)
        rows = [
            CandidateRow(sid, e.created_at, e.cwd, e.title, None, 0.0, e.updated_at)
            for sid in named
            if sid != target_id
            for e in (sessions[sid],)
        ]
        best: dict[str, tuple[int, float]] = {}
        if terms.needle and terms.words:
            skip = {row.id for row in rows}
            if target_id is not None:
                skip.add(target_id)
            match = " ".join('"' + word.replace('"', '""') + '"' for word in terms.words)
            for pk, rowid, relevance in self.index.body_matches(match, cancel):
                sid = by_pk.get(pk)
                if sid is not None and sid not in skip:
                    best[sid] = (rowid, relevance)
        body = [
            CandidateRow(sid, e.created_at, e.cwd, e.title, "", relevance, e.updated_at)
            for sid, (_, relevance) in best.items()
            for e in (sessions[sid],)
        ]
        ranked = sorted(rows + body, key=lambda row: rank(row, target_cwd, group_by_cwd))[:limit]
        shown = [row.id for row in ranked if row.snippet is not None]
        if not shown:
            return ranked
        texts = self.index.texts([best[sid][0] for sid in shown])
        found = [texts.get(best[sid][0], "") for sid in shown]
        scores = score(query, found) if score is not None else None
        rescored = dict(zip(shown, scores if scores is not None else [best[sid][1] for sid in shown], strict=True))
        snippets = {sid: terms.snippet(text) for sid, text in zip(shown, found, strict=True)}
        out = [
            row if row.snippet is None else row._replace(snippet=snippets[row.id], score=rescored[row.id])
            for row in ranked
        ]
        return sorted(out, key=lambda row: rank(row, target_cwd, group_by_cwd))

    def problems(self) -> list[str]:
        """A folder set as `[sources.<name>] dir` that does not exist (a default one that does not is no problem)."""
        folder = self._configured
        if folder is None or folder.is_dir():
            return self._builder.problems()
        shown = json.dumps(str(folder), ensure_ascii=False)
        return [f"dir = {shown} does not exist (set in [sources.{self.name}]): no sessions are read"]

    def close(self) -> None:
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        end_idle_workers()  # a closed host leaves no process behind
        self.index.close()


class TranscriptSource(AgentSource):
    """The sessions of an agent keeping one session a file (`TranscriptFormat`), kept up to date by `FileUpdates`."""

    def __init__(
        self,
        name: str,
        fmt: TranscriptFormat,
        index: SourceIndex,
        *,
        background: bool = False,
        display_name: str | None = None,
        configured: Path | None = None,
    ) -> None:
        updates = FileUpdates(name, fmt, index)
        super().__init__(
            name, fmt, index, updates, background=background, display_name=display_name, configured=configured
        )


def _titled(entry: SessionEntry, titles: Mapping[str, str]) -> SessionEntry:
    """The entry with the title the agent keeps outside its files, when it keeps one."""
    title = titles.get(entry.agent_id)
    return entry if title is None else replace(entry, title=title)


class _Names:
    """What name matches look in: every session's id, cwd and title, folded, in one text.

    A needle is searched once in the whole text (a C loop), not once per session; each match is
    mapped back to its session. The fields are joined by NUL, sessions by newline: a needle
    holding neither cannot match across two of them.
    """

    def __init__(self, entries: dict[str, SessionEntry]) -> None:
        self._ids = list(entries)
        folded = ["\0".join((sid, e.cwd or "", e.title or "")).lower().replace("\n", " ") for sid, e in entries.items()]
        self._starts = list(accumulate((len(text) + 1 for text in folded[:-1]), initial=0))
        self._text = "\n".join(folded)

    def matching(self, needle: str) -> list[str]:
        """The ids whose folded id, cwd or title holds `needle` (every id for an empty one)."""
        if not needle:
            return list(self._ids)
        if "\n" in needle:
            return []
        out: list[str] = []
        text, starts, find = self._text, self._starts, self._text.find
        at = find(needle)
        while at >= 0:
            index = bisect_right(starts, at) - 1
            out.append(self._ids[index])
            end = starts[index + 1] if index + 1 < len(starts) else len(text)
            at = find(needle, end)
        return out


FormatFactory = Callable[[Path], TranscriptFormat]
StoreFormatFactory = Callable[[Path], StoreFormat]


class _Options(TypedDict):
    """How a registered source is opened: in the background or not, its display name, its configured folder."""

    background: bool
    display_name: str | None
    configured: Path | None


def register_source(
    register: Callable[[str, SourceFactory], None],
    name: str,
    make_format: FormatFactory,
    home: tuple[str, str] | Callable[[], Path],
    projection: int,
    display_name: str | None = None,
) -> None:
    """Register `name` as a source of `make_format(folder)`'s files, indexed in the host's data dir.

    The agent's data folder is `[sources.<name>] dir` (the table's one key), else what `home()`
    says, or for `home` a pair (variable, folder) the environment variable `home[0]`, else
    `~/<home[1]>`. `projection` is the version of the format's projection rules: raise it when
    they change, and the files are read again. `display_name` is the agent's name as people know
    it (`Claude Code`), which views show beside its sessions (default: `name`).
    """

    def open_source(folder: Path, index: SourceIndex, options: _Options) -> AgentSource:
        return TranscriptSource(name, make_format(folder), index, **options)

    _register(
        register, name, home if callable(home) else _variable_or_home(*home), open_source, projection, display_name
    )


def _variable_or_home(variable: str, default: str) -> Callable[[], Path]:
    """The folder the environment variable `variable` names, else `~/<default>`."""

    def folder() -> Path:
        configured = os.environ.get(variable)
        return Path(configured).expanduser() if configured else Path.home() / default

    return folder


def register_store_source(
    register: Callable[[str, SourceFactory], None],
    name: str,
    make_format: StoreFormatFactory,
    home: Callable[[], Path],
    projection: int,
    display_name: str | None = None,
) -> None:
    """Register `name` as a source of the stores (many sessions in one file) of `make_format(folder)`.

    As `register_source` with `home` a callable, but the agent keeps many sessions in one database
    (`StoreFormat`).
    """

    def open_source(folder: Path, index: SourceIndex, options: _Options) -> AgentSource:
        fmt = make_format(folder)
        return AgentSource(name, fmt, index, StoreUpdates(name, fmt, index), **options)

    _register(register, name, home, open_source, projection, display_name)


def _register(
    register: Callable[[str, SourceFactory], None],
    name: str,
    home: Callable[[], Path],
    make_source: Callable[[Path, SourceIndex, _Options], AgentSource],
    projection: int,
    display_name: str | None,
) -> None:
    table_name = f"sources.{name}"

    def open_source(host: Host, table: dict[str, Any]) -> AgentSource:
        reject_unknown(table_name, table, ("dir",))
        explicit = read_str(table_name, table, "dir", None)
        folder = Path(explicit).expanduser() if explicit else home()
        options = _Options(
            background=host in _INTERACTIVE, display_name=display_name, configured=folder if explicit else None
        )
        return make_source(folder, SourceIndex(index_path(host.data_dir), name, projection), options)

    register(name, open_source)


class IndexingNotice:
    """An `@` menu line saying a source's index is still being built (and nothing once it is).

    Registering it marks the host as interactive: its sources then index in the background,
    so the menu answers at once from what is indexed so far. The line is `pending`, so the
    menu asks again by itself, filling with the sessions indexed meanwhile, until the build is
    done and the line goes. A check of an index that was complete before (a warm start) shows
    no line while it lists the files.
    """

    LINE = "{agent} · indexing sessions, {read}"
    """The line's text; `read` is `120 of 4,002 files`, or `listing files` before the count is known."""

    def __init__(self, host: Host, name: str) -> None:
        self._host = host
        self._name = name
        _INTERACTIVE.add(host)

    async def __call__(self, agent: Agent, token: AtToken, signal: asyncio.Event) -> list[MentionCompletion]:
        import asyncio  # only the terminal UI asks: a command that lists sessions never loads it

        sources = self._host.sources
        if token.quoted or self._name not in sources.names:
            return []
        source = await asyncio.to_thread(sources.get, self._name)
        if not isinstance(source, AgentSource):
            return []
        read = await asyncio.to_thread(self._how_far, source)
        if read is None:
            return []
        from dsh_host.ui import MentionCompletion  # the terminal UI's type: only the UI asks

        return [
            MentionCompletion(
                token.prefix,
                display=self.LINE.format(agent=display_inline_text(source.display_name), read=read),
                meta="the menu lists what is indexed so far",
                pending=True,
            )
        ]

    @staticmethod
    def _how_far(source: AgentSource) -> str | None:
        """How far the source's build is, for the line (None: no build worth a line)."""
        progress = source.build_index(background=True)
        if progress.complete or not progress.building:
            return None
        if progress.files_total:
            return f"{progress.files_done:,} of {progress.files_total:,} files"
        if not source._building_here():
            return None
        # Listing the files: worth a line only when the index was not complete before.
        return None if source._complete_before else "listing files"


def _row(session_id: str, entry: SessionEntry) -> SessionRow:
    """The listing row a session's index entry stands for."""
    return SessionRow(session_id, entry.created_at, entry.cwd, entry.title, entry.updated_at)


def _header(session_id: str, entry: SessionEntry) -> SessionHeader:
    """The header a session's index entry stands for (an agent's transcript has no header of its own)."""
    return SessionHeader(id=session_id, created_at=entry.created_at, cwd=entry.cwd)
