"""Incremental reads equal whole reads: a file read on from where the index stopped gives what a read from
its first byte gives, after random appends (cut anywhere, mid-line included), rewinds, compactions,
rollbacks, truncations and replacements.

What the index cannot see is out of scope: a rewrite in place that keeps the file's identity,
its size-independent head and the bytes just before the offset (agents append, they do not
rewrite). Everything else is compared after every observation: the session's facts, every
message, and the count of lines left out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_sources import reading
from dsh_sources.formats import claude_code
from dsh_sources.formats.claude_code import ClaudeCodeFormat
from dsh_sources.formats.codex import CodexFormat
from dsh_sources.index import SourceIndex
from dsh_sources.reading import read_file, read_whole
from dsh_sources.transcript import TranscriptFormat
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.dsh_sources.test_properties import claude_lines, codex_lines, mutated

pytestmark = pytest.mark.foreign_logs


@pytest.fixture(autouse=True)
def keys_of_every_file(monkeypatch):
    """Keep the record keys of small files too, so that they are read on from their offset like large ones.

    A read from the start then spills its keys (`spill.NodeSpill`) as a large file's does, and a
    window of two records in memory makes it spill while it reads, not only at its end; the whole
    reads it is compared with keep theirs in memory.
    """
    monkeypatch.setattr(reading, "KEYED_BYTES", 0)
    monkeypatch.setattr(claude_code, "WINDOW", 2)


class Observer:
    """An index of one file, brought up to date on demand and compared with a whole read."""

    def __init__(self, tmp: Path, fmt: TranscriptFormat, path: Path) -> None:
        self.fmt = fmt
        self.path = path
        self.index = SourceIndex(tmp / "index" / "index.sqlite3", "test", 1)
        self.fresh_reads = 0

    def observe(self) -> None:
        entry = self.index.file(str(self.path))
        read = read_file(self.fmt, str(self.path), entry, self.index)
        self.fresh_reads += read.fresh
        assert self.index.put([read]) == []
        assert not [name for name in os.listdir(self.index.path.parent) if name.startswith("spill-")]
        self.compare()

    def compare(self) -> None:
        whole = read_whole(self.fmt, str(self.path))
        sessions = [s for s in self.index.sessions() if s.path == str(self.path)]
        reports = self.index.reports()
        skipped = sum(skipped for _, _, skipped, _ in reports)
        if whole is None:
            assert sessions == []
            return
        assert len(sessions) == 1
        (entry,) = sessions
        facts = (entry.agent_id, entry.cwd, entry.created_at, entry.updated_at, entry.title, entry.messages)
        expected = (whole.agent_id, whole.cwd, whole.created_at, whole.updated_at, whole.title, len(whole.messages))
        assert facts == expected
        assert tuple(said.message for said in self.index.messages(entry.pk)) == whole.messages
        assert skipped == whole.skipped

    def close(self) -> None:
        self.index.close()


def replay(tmp: Path, fmt: TranscriptFormat, path: Path, data: bytes, draw) -> Observer:
    """Write `data` to `path` in drawn pieces, with drawn truncations and replacements, observing after each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    observer = Observer(tmp, fmt, path)
    written = 0
    for _ in range(draw(st.integers(1, 6))):
        event = draw(st.sampled_from(["append", "append", "append", "truncate", "replace"]))
        if event == "truncate" and written:
            written = draw(st.integers(0, written))
            with open(path, "r+b") as file:
                file.truncate(written)
        elif event == "replace":
            replacement = path.with_suffix(".new")
            replacement.write_bytes(data[:written])
            os.replace(replacement, path)
        else:
            end = draw(st.integers(written, len(data)))
            with open(path, "ab") as file:
                file.write(data[written:end])
            written = end
        observer.observe()
    with open(path, "ab") as file:
        file.write(data[written:])
    observer.observe()
    return observer


def replay_drawn(tmp: Path, data: st.DataObject, lines: list[str], fmt: TranscriptFormat, path: Path) -> None:
    """Replay drawn lines (mutated half the time) into `path` as `replay` does, comparing at every step."""
    if data.draw(st.booleans()):
        lines = data.draw(mutated(lines, reorders=True))
    replay(tmp, fmt, path, "".join(lines).encode(), data.draw).close()


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_claude_code_incremental_reads_equal_whole_reads(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("c")
    path = tmp / "claude" / "projects" / "p" / "6f0c6a53-8c1b-4a43-9d55-2a2b7f7a1a11.jsonl"
    replay_drawn(tmp, data, data.draw(claude_lines(branches=True)), ClaudeCodeFormat(tmp / "claude"), path)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_codex_incremental_reads_equal_whole_reads(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("x")
    path = tmp / "codex" / "sessions" / "rollout-2026-01-01T00-00-00-0199a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b.jsonl"
    replay_drawn(tmp, data, data.draw(codex_lines(branches=True)), CodexFormat(tmp / "codex"), path)


def append_since(path: Path, lines: list[str], count: int) -> None:
    """Append to `path` the lines written since the first `count` (as the agent appends them)."""
    with open(path, "a", encoding="utf-8") as file:
        file.writelines(lines[count:])


def test_a_grown_transcript_is_read_only_where_it_grew(tmp_path):
    t = ClaudeTranscript()
    t.user("first question")
    t.reply(("text", "first answer"))
    path = t.write(tmp_path / "claude")
    observer = Observer(tmp_path, ClaudeCodeFormat(tmp_path / "claude"), path)
    observer.observe()
    first = observer.index.file(str(path))
    assert first is not None and first.seen.offset == path.stat().st_size
    count = len(t.records)
    t.user("second question")
    t.reply(("thinking", "hidden"), ("text", "second"), ("text", "answer"))
    append_since(path, t.lines(), count)
    observer.observe()
    assert observer.fresh_reads == 1  # the second read went on from the offset
    observer.close()


def test_a_reply_streamed_across_two_reads_is_one_message(tmp_path):
    t = ClaudeTranscript()
    t.user("question")
    t.reply(("text", "part one"), ("text", "part two"))
    lines = t.lines()
    path = tmp_path / "claude" / "projects" / "p" / f"{t.session_id}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(lines[:-1]), encoding="utf-8")
    observer = Observer(tmp_path, ClaudeCodeFormat(tmp_path / "claude"), path)
    observer.observe()
    with open(path, "a", encoding="utf-8") as file:
        file.write(lines[-1])
    observer.observe()
    (entry,) = observer.index.sessions()
    assert [said.message.texts for said in observer.index.messages(entry.pk)] == [
        ("question",),
        ("part one", "part two"),
    ]
    assert observer.fresh_reads == 1
    observer.close()


def test_an_append_cut_by_a_crash_and_completed_later_is_read_once_whole(tmp_path):
    r = CodexRollout()
    r.meta()
    r.user("before the crash")
    r.assistant("reply")
    done = "".join(r.lines())
    r.user("written across the crash")
    last = r.lines()[-1]
    path = r.path_in(tmp_path / "codex")
    path.parent.mkdir(parents=True)
    path.write_text(done + last[:20], encoding="utf-8")
    observer = Observer(tmp_path, CodexFormat(tmp_path / "codex"), path)
    observer.observe()
    assert observer.index.reports()[0][2] == 1  # the unfinished line counts until it is whole
    with open(path, "a", encoding="utf-8") as file:
        file.write(last[20:])
    observer.observe()
    assert observer.index.reports() == [] and observer.fresh_reads == 1
    observer.close()


def observed_rollout(tmp_path: Path, turns: int) -> tuple[CodexRollout, Path, Observer]:
    """A rollout of `turns` prompts and answers, written and read once into an index."""
    r = CodexRollout()
    r.meta()
    for n in range(turns):
        r.user(f"prompt {n}")
        r.assistant(f"answer {n}")
    path = r.write(tmp_path / "codex")
    observer = Observer(tmp_path, CodexFormat(tmp_path / "codex"), path)
    observer.observe()
    return r, path, observer


@pytest.mark.parametrize("change", ["truncated", "replaced", "head rewritten", "tail rewritten"])
def test_a_file_changed_other_than_by_appending_is_read_from_its_start(tmp_path, change):
    _, path, observer = observed_rollout(tmp_path, 40)
    data = path.read_bytes()
    if change == "truncated":
        path.write_bytes(data[: len(data) // 2].rsplit(b"\n", 2)[0] + b"\n")
    elif change == "replaced":
        other = path.with_suffix(".tmp")
        other.write_bytes(data.replace(b"prompt 39", b"prompt XX"))
        os.replace(other, path)
    elif change == "head rewritten":
        with open(path, "r+b") as file:
            file.write(data[:200].replace(b"2026", b"2027"))
            file.seek(0, 2)
            file.write(b"\n")
    else:
        with open(path, "r+b") as file:
            file.seek(len(data) - 60)
            file.write(data[-60:].replace(b"answer", b"ANSWER"))
            file.write(b"\n")
    observer.observe()
    assert observer.fresh_reads == 2
    observer.close()


@pytest.mark.parametrize("turns", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("then", ["rollback", "legacy compaction"])
def test_codex_history_rewritten_past_what_was_just_read(tmp_path, turns, then):
    """A rollback or an older compaction that reaches back into messages stored by an earlier read."""
    r, path, observer = observed_rollout(tmp_path, 4)
    count = len(r.lines())
    r.user("one more")
    if then == "rollback":
        r.rollback(turns)
    else:
        r.legacy_compacted(f"summary after {turns}")
    append_since(path, r.lines(), count)
    observer.observe()
    assert observer.fresh_reads == 1
    observer.close()


def test_a_small_file_that_grows_is_read_again_whole_and_a_large_one_on_from_its_offset(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "KEYED_BYTES", 64 * 1024)
    t = ClaudeTranscript()
    for n in range(3):
        t.user(f"question {n}")
        t.reply(("text", f"answer {n}"))
    path = t.write(tmp_path / "claude")
    observer = Observer(tmp_path, ClaudeCodeFormat(tmp_path / "claude"), path)
    observer.observe()
    count = len(t.records)
    t.user("more")
    t.reply(("text", "x" * 70_000))
    append_since(path, t.lines(), count)
    observer.observe()
    assert observer.fresh_reads == 2  # small: its keys were not kept
    count = len(t.records)
    t.user("and more")
    append_since(path, t.lines(), count)
    observer.observe()
    assert observer.fresh_reads == 2  # large now: read on from the offset
    observer.close()
