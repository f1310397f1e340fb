"""`TranscriptSource`: one agent's session files as a read-only `dsh_host.SessionSource`.

Listing and search answer from the freshness index (`index.SourceIndex`), refreshed first: the
files are listed and stat-ed, and only those whose size or mtime changed are read again. A read
of one session parses its file afresh, so a snapshot is always current. In the terminal UI the
refresh runs in the background instead (`IndexingNotice` turns that on): the `@` menu answers at
once from what is indexed so far and says the index is still being built.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
import weakref
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_host import CandidateRow, SessionHeader, SessionNotFound, SessionRow, StoredTitle, display_inline_text
from dsh_host.settings import read_str, reject_unknown
from dsh_host.sources import BodyScorer, SearchQuery, SourceConversation, SourceFileReport
from dsh_sources.index import INDEX_FILE, Entry, SourceIndex
from dsh_sources.transcript import Transcript, TranscriptFormat

if TYPE_CHECKING:
    from dsh_host import Agent, Event, Host, SurfaceSnapshot, SurfaceTexts
    from dsh_host.hookspecs import SourceFactory
    from dsh_host.ui import AtToken, MentionCompletion

_INTERACTIVE: weakref.WeakSet[Host] = weakref.WeakSet()
"""Hosts running the terminal UI: their sources index in the background."""

_BATCH = 64
"""A refresh writes what it read this many files at a time (and a background build shows it)."""

RECHECK_SECONDS = 1.0
"""A search trusts an index whose files were all checked less than this long ago (listings always check)."""


class TranscriptSource:
    """The sessions of one agent (`fmt`), indexed in `index`, under ids `<name>:<agent id>`."""

    def __init__(self, name: str, fmt: TranscriptFormat, index: SourceIndex, *, background: bool = False) -> None:
        self.name = name
        self.format = fmt
        self.index = index
        self._prefix = name + ":"
        self._background = background
        self._refresh_lock = threading.Lock()
        self._builder: threading.Thread | None = None
        self._progress: tuple[int, int | None] | None = None
        self._built = False
        self._entries: dict[str, Entry] | None = None
        self._names: _Names | None = None
        self._by_pk: dict[int, str] = {}
        self._known: dict[str, tuple[int, int]] | None = None
        self._checked = -float("inf")
        self._closed = threading.Event()

    # -- freshness ---------------------------------------------------------------------------

    def build_in_background(self) -> None:
        """From now on refresh in a background thread (starting one now) and answer from what is indexed."""
        self._background = True
        self._fresh()

    def indexing(self) -> tuple[int, int | None] | None:
        """(files read, files to read, None while they are being listed) during a long build, else None.

        A refresh that re-reads a few changed files is not worth a word; a first build (or one
        with more than a few dozen files to read) is.
        """
        progress = self._progress
        if progress is None or not self._building():
            return None
        done, total = progress
        if total is None:
            return None if self._built else progress
        return progress if total > _BATCH and done < total else None

    def _building(self) -> bool:
        builder = self._builder
        return builder is not None and builder.is_alive()

    def _fresh(self, recheck: float = 0.0) -> None:
        """Bring the index up to date (or, in the background, start doing so).

        `recheck`: an index whose files were all checked less than this many seconds ago is
        taken as it is (a burst of searches stats the files once).
        """
        if not self._background:
            if time.monotonic() - self._checked >= recheck:
                self.refresh()
        elif not self._building():
            self._progress = (0, None)
            self._builder = threading.Thread(target=self.refresh, name=f"dsh-sources-{self.name}", daemon=True)
            self._builder.start()

    def refresh(self) -> None:
        """Read again every file whose size or mtime changed; forget the files that are gone."""
        with self._refresh_lock:
            started = time.monotonic()
            listed: dict[str, tuple[int, int]] = {}
            for path in self.format.files():
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    listed[path] = (info.st_size, info.st_mtime_ns)
            known = self._known if self._known is not None else self.index.known()
            gone = [path for path in known if path not in listed]
            stale = [path for path, signature in listed.items() if known.get(path) != signature]
            self.index.forget(gone)
            for path in gone:
                del known[path]
            if gone:
                self._entries = None
            self._progress = (0, len(stale))
            for start in range(0, len(stale), _BATCH):
                if self._closed.is_set():
                    return
                found = [
                    (path, *listed[path], transcript)
                    for path in stale[start : start + _BATCH]
                    for transcript in self._read(path)
                ]
                self.index.put(found)
                known.update((path, (size, mtime)) for path, size, mtime, _ in found)
                self._entries = None
                self._progress = (min(start + _BATCH, len(stale)), len(stale))
            self._known = known
            self._checked = started
            self._built = True

    def _read(self, path: str) -> list[Transcript | None]:
        """What reading `path` found (one item), or nothing when it cannot be read now (tried again next time)."""
        try:
            return [self.format.read(path)]
        except OSError:
            return []

    def _sessions(self) -> dict[str, Entry]:
        """The indexed sessions by full id; one file per agent id (the latest active wins)."""
        entries = self._entries
        if entries is None:
            chosen: dict[str, Entry] = {}
            for entry in self.index.entries():
                held = chosen.get(entry.agent_id)
                if held is None or (entry.updated_at, entry.path) > (held.updated_at, held.path):
                    chosen[entry.agent_id] = entry
            titles = self.format.titles()
            entries = {
                self._prefix + agent_id: entry._replace(title=titles.get(agent_id, entry.title))
                for agent_id, entry in chosen.items()
            }
            self._names = _Names(entries)
            self._by_pk = {entry.pk: sid for sid, entry in entries.items()}
            self._entries = entries
        return entries

    def _entry(self, session_id: str) -> Entry:
        if not session_id.startswith(self._prefix):
            raise SessionNotFound(session_id)
        entry = self._sessions().get(session_id)
        if entry is None:
            self.refresh()
            entry = self._sessions().get(session_id)
        if entry is None:
            raise SessionNotFound(session_id)
        return entry

    # -- reads -------------------------------------------------------------------------------

    def _conversation(self, session_id: str) -> tuple[Entry, Transcript, SourceConversation]:
        """The session's file read now (SessionNotFound when it vanished or holds no session)."""
        entry = self._entry(session_id)
        try:
            transcript = self.format.read(entry.path)
        except OSError:
            transcript = None
        if transcript is None:
            raise SessionNotFound(session_id)
        header = SessionHeader(id=session_id, created_at=transcript.created_at, cwd=transcript.cwd)
        return entry, transcript, SourceConversation(header, transcript.messages, self.format.provider)

    def list_sessions(self) -> list[SessionRow]:
        self._fresh()
        rows = [SessionRow(sid, e.created_at, e.cwd, e.title, e.updated_at) for sid, e in self._sessions().items()]
        return sorted(rows, key=lambda row: (-row.created_at, row.id))

    def has(self, session_id: str) -> bool:
        try:
            self._entry(session_id)
        except SessionNotFound:
            return False
        return True

    def read_header(self, session_id: str) -> SessionHeader:
        entry = self._entry(session_id)
        return SessionHeader(id=session_id, created_at=entry.created_at, cwd=entry.cwd)

    def read_title(self, session_id: str) -> StoredTitle | None:
        entry = self._entry(session_id)
        return None if entry.title is None else StoredTitle(entry.title, max(entry.messages - 1, 0), entry.updated_at)

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        return self._conversation(session_id)[2].surface()

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        return [self._conversation(session_id)[2].texts() for session_id in session_ids]

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        conversation = self._conversation(session_id)[2]
        return conversation.header, conversation.lines()

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        conversation = self._conversation(session_id)[2]
        return conversation.header, conversation.events()

    def check(self, session_id: str | None = None) -> list[SourceFileReport]:
        if session_id is None:
            self.refresh()
            rows = self.index.reports()
        else:
            rows = self.index.reports(self._entry(session_id).agent_id)
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
        sessions = self._sessions()
        names, needle = self._names, terms.needle
        rank = terms.rank_key
        if names is None or "\0" in needle:
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
            by_pk = self._by_pk
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

    def close(self) -> None:
        self._closed.set()
        builder = self._builder
        if builder is not None and builder is not threading.current_thread():
            builder.join()
        self.index.close()


class _Names:
    """What name matches look in: every session's id, cwd and title, folded, in one text.

    A needle is searched once in the whole text (a C loop), not once per session; each match is
    mapped back to its session. The fields are joined by NUL, sessions by newline: a needle
    holding neither cannot match across two of them.
    """

    def __init__(self, entries: dict[str, Entry]) -> None:
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


def register_source(
    register: Callable[[str, SourceFactory], None], name: str, make_format: FormatFactory, home: tuple[str, str]
) -> None:
    """Register `name` as a source of `make_format(folder)`'s files, indexed in the host's data dir.

    The agent's data folder is `[sources.<name>] dir` (the table's one key), else the
    environment variable `home[0]`, else `~/<home[1]>`.
    """
    table_name = f"sources.{name}"
    variable, default = home

    def open_source(host: Host, table: dict[str, Any]) -> TranscriptSource:
        reject_unknown(table_name, table, ("dir",))
        configured = read_str(table_name, table, "dir", None) or os.environ.get(variable)
        folder = Path(configured).expanduser() if configured else Path.home() / default
        index = SourceIndex(host.data_dir / INDEX_FILE, name)
        return TranscriptSource(name, make_format(folder), index, background=host in _INTERACTIVE)

    register(name, open_source)


class IndexingNotice:
    """An `@` menu line saying a source's index is still being built (and nothing once it is).

    Registering it marks the host as interactive: its sources then index in the background,
    so the menu answers at once from what is indexed so far.
    """

    def __init__(self, host: Host, name: str) -> None:
        self._host = host
        self._name = name
        _INTERACTIVE.add(host)

    async def __call__(self, agent: Agent, token: AtToken, signal: asyncio.Event) -> list[MentionCompletion]:
        sources = self._host.sources
        if token.quoted or self._name not in sources.names:
            return []
        source = await asyncio.to_thread(sources.get, self._name)
        if not isinstance(source, TranscriptSource):
            return []
        source.build_in_background()
        progress = source.indexing()
        if progress is None:
            return []
        from dsh_host.ui import MentionCompletion  # the terminal UI's type: only the UI asks

        done, total = progress
        read = "listing files" if total is None else f"{done} of {total} files read"
        return [
            MentionCompletion(
                token.prefix,
                display=f"{display_inline_text(self._name)} · indexing sessions, {read}",
                meta="the menu lists what is indexed so far",
            )
        ]
