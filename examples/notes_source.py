"""A minimal session source: each Markdown file of a folder is a read-only session of one message.

Mount it in code (`Host.start(config, plugins={"notes": NotesPlugin()})`) with
`[sources.notes] dir = "..."`; the notes then list, search and `@`-mention like sessions, as
`notes:<file name>`, and dsh refuses to write to them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dsh_host import (
    CandidateRow,
    Event,
    Host,
    SessionHeader,
    SessionNotFound,
    SessionRow,
    StoredTitle,
    SurfaceSnapshot,
    SurfaceTexts,
    hookimpl,
)
from dsh_host.hookspecs import SourceFactory
from dsh_host.settings import read_str, reject_unknown
from dsh_host.sources import BodyScorer, SearchQuery, SourceConversation, SourceFileReport, SourceMessage


class NotesSource:
    """`<dir>/*.md` as sessions `notes:<name>`: the note is one user message, its first line the title."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _conversation(self, session_id: str) -> SourceConversation:
        name = session_id.removeprefix("notes:")
        path = self.folder / name
        try:
            if not session_id.startswith("notes:") or path.suffix != ".md" or path.parent != self.folder:
                raise FileNotFoundError(name)
            text, mtime = path.read_text(encoding="utf-8"), int(path.stat().st_mtime * 1000)
        except (OSError, UnicodeError):
            raise SessionNotFound(session_id) from None
        header = SessionHeader(id=session_id, created_at=mtime, cwd=str(self.folder))
        return SourceConversation(header, (SourceMessage("user", (text,), mtime),), provider="notes")

    def _all(self) -> list[SourceConversation]:
        out = []
        for path in sorted(self.folder.glob("*.md")):
            try:
                out.append(self._conversation("notes:" + path.name))
            except SessionNotFound:
                continue  # gone, or not text: not a note
        return out

    def list_sessions(self) -> list[SessionRow]:
        rows = [SessionRow(c.header.id, c.header.created_at, c.header.cwd, _title(c)) for c in self._all()]
        return sorted(rows, key=lambda row: (-row.created_at, row.id))

    def has(self, session_id: str) -> bool:
        try:
            self._conversation(session_id)
        except SessionNotFound:
            return False
        return True

    def read_header(self, session_id: str) -> SessionHeader:
        return self._conversation(session_id).header

    def read_title(self, session_id: str) -> StoredTitle | None:
        return None  # a listing shows the first line; a note keeps no title of its own

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
        terms = SearchQuery(query)
        rows: list[CandidateRow] = []
        for conversation in self._all():
            header, text = conversation.header, conversation.messages[0].texts[0]
            title = _title(conversation)
            if header.id == target_id:
                continue
            if terms.matches_name(header.id, header.cwd, title):
                rows.append(CandidateRow(header.id, header.created_at, header.cwd, title, None, 0.0))
            elif terms.needle and terms.words and all(w.lower() in text.lower() for w in terms.words):
                relevance = (score(query, [text]) or [0.0])[0] if score is not None else 0.0
                snippet = terms.snippet(text)
                rows.append(CandidateRow(header.id, header.created_at, header.cwd, title, snippet, relevance))
        return sorted(rows, key=lambda row: terms.rank_key(row, target_cwd, group_by_cwd))[:limit]

    def check(self, session_id: str | None = None) -> list[SourceFileReport]:
        return []  # every note is read whole: no line is ever skipped

    def close(self) -> None:
        pass


def _title(conversation: SourceConversation) -> str:
    return conversation.messages[0].texts[0].strip().split("\n")[0][:80]


class NotesPlugin:
    """Registers the `notes` source; `[sources.notes] dir` names the folder."""

    @hookimpl
    def dsh_register_session_sources(self, register: Callable[[str, SourceFactory], None]) -> None:
        def open_notes(host: Host, table: dict[str, Any]) -> NotesSource:
            reject_unknown("sources.notes", table, ("dir",))
            return NotesSource(Path(read_str("sources.notes", table, "dir", None) or host.data_dir / "notes"))

        register("notes", open_notes)
