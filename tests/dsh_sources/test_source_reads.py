"""Reads that must survive the agents' files changing under them, and what the index re-reads."""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path

import pytest

from dsh_host import SessionNotFound
from dsh_host.ui import AtToken, MentionCompletion
from dsh_sources.formats.claude_code import ClaudeCodeFormat
from dsh_sources.index import SourceIndex
from dsh_sources.lines import MAX_LINE_BYTES, JsonLines
from dsh_sources.source import IndexingNotice, TranscriptSource
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout

pytestmark = pytest.mark.foreign_logs


def claude_session(base: Path, prompt: str = "q", **kwargs) -> tuple[ClaudeTranscript, Path]:
    t = ClaudeTranscript(**kwargs)
    t.user(prompt)
    t.reply(("text", "a"))
    return t, t.write(base)


def test_a_session_whose_file_vanished_or_became_unreadable_is_not_found(source_host, agent_dirs):
    t, path = claude_session(agent_dirs.claude)
    host = source_host()
    query = host.services.session_query
    sid = f"claude-code:{t.session_id}"
    assert [r.id for r in asyncio.run(query.list_sessions())] == [sid]
    path.unlink()
    with pytest.raises(SessionNotFound):
        asyncio.run(query.read_surface(sid))
    path.mkdir()  # a folder where the file was: unreadable as a file
    with pytest.raises(SessionNotFound):
        asyncio.run(query.read_surface_texts([sid]))
    assert asyncio.run(query.list_sessions()) == []


class CountingFormat(ClaudeCodeFormat):
    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.reads: list[str] = []

    def projector(self, path: str, state, stored):
        self.reads.append(path)
        return super().projector(path, state, stored)


def test_listing_rereads_only_files_whose_size_or_mtime_changed(tmp_path):
    base = tmp_path / "claude"
    first, first_path = claude_session(base, "one")
    claude_session(base, "two")
    fmt = CountingFormat(base)
    source = TranscriptSource("claude-code", fmt, SourceIndex(tmp_path / "index.sqlite3", "claude-code", 1))
    assert len(source.list_sessions()) == 2 and len(fmt.reads) == 2
    source.list_sessions()
    assert len(fmt.reads) == 2
    first.user("more")
    first.write(base)
    assert source.list_sessions() and len(fmt.reads) == 2  # checked less than a second ago: trusted
    source.refresh()
    rows = source.list_sessions()
    assert fmt.reads[2:] == [str(first_path)] and len(rows) == 2
    again = TranscriptSource("claude-code", fmt, SourceIndex(tmp_path / "index.sqlite3", "claude-code", 1))
    again.list_sessions()  # a new process: the index on disk is still fresh
    assert len(fmt.reads) == 3
    source.close()
    again.close()


class GatedFormat(ClaudeCodeFormat):
    """Reads wait for the test to open the gate after the first one (a build caught half way)."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.gate = threading.Event()
        self.first_done = threading.Event()

    def projector(self, path: str, state, stored):
        if self.first_done.is_set():
            self.gate.wait()
        try:
            return super().projector(path, state, stored)
        finally:
            self.first_done.set()


def test_the_menu_answers_from_what_is_indexed_while_the_index_builds(make_host, agent_dirs, tmp_path):
    for n in range(80):
        claude_session(agent_dirs.claude, f"prompt {n}")
    host = make_host(["claude-code"], config={"sources": agent_dirs.tables()})
    notice = IndexingNotice(host, "claude-code")  # as the terminal UI registers it at start-up
    source = host.sources.get("claude-code")
    assert isinstance(source, TranscriptSource)
    fmt = source.format = source._builder.format = GatedFormat(agent_dirs.claude)
    token = AtToken("@prompt", "prompt", quoted=False)
    items = asyncio.run(notice(None, token, asyncio.Event()))
    fmt.first_done.wait()
    while source.index_progress().files_total == 0:
        assert source._thread is not None
        source._thread.join(0.01)  # the listing of 80 files comes first; then the first read is done
    rows = source.search_candidates("prompt", target_id=None, target_cwd=None, limit=100)
    assert len(rows) < 80  # what is indexed so far, at once
    items = asyncio.run(notice(None, token, asyncio.Event()))
    assert [type(item) for item in items] == [MentionCompletion]
    assert items[0].value == "@prompt" and items[0].pending
    done = source.index_progress().files_done
    assert items[0].display == f"Claude Code · indexing sessions, {done} of 80 files"
    fmt.gate.set()
    assert source._thread is not None
    source._thread.join()
    assert len(source.search_candidates("prompt", target_id=None, target_cwd=None, limit=100)) == 80
    assert asyncio.run(notice(None, token, asyncio.Event())) == []


class ListingGate(ClaudeCodeFormat):
    """Listing the files waits for the test to open the gate."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.gate = threading.Event()

    def files(self):
        self.gate.wait()
        yield from super().files()


def test_the_menu_says_listing_files_on_a_cold_index_and_nothing_on_a_warm_one(make_host, agent_dirs):
    for n in range(3):
        claude_session(agent_dirs.claude, f"prompt {n}")
    token = AtToken("@prompt", "prompt", quoted=False)
    for warm in (False, True):
        host = make_host(["claude-code"], config={"sources": agent_dirs.tables()})
        notice = IndexingNotice(host, "claude-code")
        source = host.sources.get("claude-code")
        assert isinstance(source, TranscriptSource)
        fmt = source.format = source._builder.format = ListingGate(agent_dirs.claude)
        try:
            items = asyncio.run(notice(None, token, asyncio.Event()))  # starts the build, which waits to list
        finally:
            fmt.gate.set()  # whatever the menu said, the build must not wait past the test
        if warm:
            assert items == []  # the index was complete: checking it is no news
        else:
            assert [(item.display, item.pending) for item in items] == [
                ("Claude Code · indexing sessions, listing files", True)
            ]
        assert source._thread is not None
        source._thread.join()
        assert asyncio.run(notice(None, token, asyncio.Event())) == []
        assert len(source.list_sessions()) == 3
        host.close()  # the refresh those two may have started ends here, not during the warm start


class Reads(io.BytesIO):
    """A file that remembers the longest piece it handed out."""

    longest = 0

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        piece = super().readline(size)
        self.longest = max(self.longest, len(piece))
        return piece

    def read(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        piece = super().read(size)
        self.longest = max(self.longest, len(piece))
        return piece


def test_a_line_over_the_limit_is_skipped_without_being_held_whole():
    data = b'{"a": 1}\n' + b'{"big": "' + b"x" * 5000 + b'"}\n' + b'{"b": 2}\n'
    file = Reads(data)
    lines = JsonLines(file, limit=1000)
    assert list(lines) == [{"a": 1}, {"b": 2}]
    assert (lines.skipped, lines.oversized) == (1, 1)
    assert file.longest <= 1001


def test_a_line_of_more_than_64_mib_does_not_stop_the_session(source_host, agent_dirs):
    t, path = claude_session(agent_dirs.claude, "before the paste")
    with path.open("ab") as file:
        file.write(b'{"type":"user","message":{"role":"user","content":"' + b"A" * (MAX_LINE_BYTES + 10) + b'"}}\n')
    written = len(t.records)
    t.reply(("text", "after the paste"))
    with path.open("a", encoding="utf-8") as file:
        file.writelines(t.lines()[written:])
    host = source_host()
    sid = f"claude-code:{t.session_id}"
    texts = asyncio.run(host.services.session_query.read_surface_texts([sid]))[0]
    assert [t.text for t in texts.texts] == ["before the paste", "a", "after the paste"]
    (report,) = host.sources.get("claude-code").check()
    assert (report.skipped, report.oversized) == (1, 1)


def test_multi_megabyte_lines_still_yield_their_text(source_host, agent_dirs):
    t = ClaudeTranscript()
    big = "pasted " * 500_000  # 3.5 MB of text in one prompt
    t.user(
        [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 3_000_000}},
            {"type": "text", "text": big},
        ]
    )
    t.reply(("text", "seen"))
    t.write(agent_dirs.claude)
    host = source_host()
    texts = asyncio.run(host.services.session_query.read_surface_texts([f"claude-code:{t.session_id}"]))[0]
    assert [len(t.text) for t in texts.texts] == [len(big), 4]


def test_a_codex_session_found_twice_is_listed_once(source_host, agent_dirs):
    r = CodexRollout()
    r.meta()
    r.user("archived later")
    r.write(agent_dirs.codex)
    r.assistant("still going")
    r.write(agent_dirs.codex, archived=True)
    rows = asyncio.run(source_host().services.session_query.list_sessions())
    assert [row.id for row in rows] == [f"codex:{r.session_id}"]


def test_sources_of_one_index_share_a_search_until_one_of_them_is_written(source_host, agent_dirs, monkeypatch):
    claude_session(agent_dirs.claude, "the walrus ledger")
    rollout = CodexRollout()
    rollout.meta()
    rollout.user("a walrus ledger for codex")
    rollout.write(agent_dirs.codex)
    host = source_host()
    claude, codex = host.sources.get("claude-code"), host.sources.get("codex")
    for source in (claude, codex):
        source.list_sessions()  # both indexed
    queries: list[str] = []
    real = SourceIndex._ranked

    def counted(self, match, cancel):
        queries.append(match)
        return real(self, match, cancel)

    monkeypatch.setattr(SourceIndex, "_ranked", counted)

    def found() -> list[list[str]]:
        return [
            [row.id for row in source.search_candidates("walrus", target_id=None, target_cwd=None, limit=10)]
            for source in (claude, codex)
        ]

    first = found()
    assert [len(ids) for ids in first] == [1, 1] and len(queries) == 1  # one query served both sources
    assert found() == first and len(queries) == 1
    claude_session(agent_dirs.claude, "another walrus")
    claude.refresh()  # a write to the index: the next search asks again, and sees the new session
    assert [len(ids) for ids in found()] == [2, 1] and len(queries) == 2
