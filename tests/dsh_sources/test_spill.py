"""A large file read from its start keeps its record keys on disk (`NodeSpill`), not in memory.

What the spill gives is checked against the in-memory projection (the incremental property test
also runs every read through a spill of a two-record window); here: the index holds the same
keys either way, no spill outlives its read (written, cancelled, or left by a killed worker),
and a file that breaks the order is still projected whole.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dsh_sources import build, index, reading
from dsh_sources.formats import claude_code
from dsh_sources.formats.claude_code import ClaudeCodeFormat
from dsh_sources.index import SourceIndex, index_path, process_alive
from dsh_sources.lines import ReadCancelled
from dsh_sources.reading import read_file, read_whole
from dsh_sources.source import TranscriptSource
from dsh_sources.spill import NodeSpill, sweep
from tests.dsh_sources.builders import ClaudeTranscript

pytestmark = pytest.mark.foreign_logs


@pytest.fixture(autouse=True)
def small_window(monkeypatch):
    """Every file keeps its keys and spills after a few records, so small files show what large ones do."""
    monkeypatch.setattr(reading, "KEYED_BYTES", 0)
    monkeypatch.setattr(claude_code, "WINDOW", 4)


def transcript(turns: int = 12) -> ClaudeTranscript:
    t = ClaudeTranscript()
    for turn in range(turns):
        t.user(f"question {turn}")
        t.reply(("text", f"answer {turn}"))
        t.progress()
    return t


def nodes(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT key, parent, says, at, msgs, blocks FROM nodes ORDER BY key").fetchall()


def spills(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("spill-"))


def index_of(tmp: Path, name: str) -> SourceIndex:
    return SourceIndex(index_path(tmp / name), "claude-code", 1)


def test_a_spilled_read_stores_the_keys_and_messages_an_in_memory_read_stores(tmp_path):
    t = transcript()
    fork = t.user("a question asked again")
    t.rewind(fork)  # a branch: some records end off the chain
    t.reply(("text", "the answer on the new branch"))
    path = t.write(tmp_path / "claude")
    fmt = ClaudeCodeFormat(tmp_path / "claude")
    spilled, in_memory = index_of(tmp_path, "spilled"), index_of(tmp_path, "memory")
    read = read_file(fmt, str(path), None, spilled)
    assert isinstance(read.update.nodes, NodeSpill)
    assert spilled.put([read]) == []
    plain = read_file(fmt, str(path), None, None)  # no index, no spill folder: in memory
    assert isinstance(plain.update.nodes, tuple)
    assert in_memory.put([plain]) == []
    assert nodes(spilled.path) == nodes(in_memory.path)
    assert len(nodes(spilled.path)) > claude_code.WINDOW
    (session,) = spilled.sessions()
    whole = read_whole(fmt, str(path))
    assert whole is not None
    assert tuple(said.message for said in spilled.messages(session.pk)) == whole.messages
    assert spills(spilled.path.parent) == []


def test_more_spilled_reads_than_a_connection_attaches_are_written_in_one_put(tmp_path):
    # Three transactions, each attaching its spills under the names the one before detached.
    count = index.ATTACHED_SPILLS * 2 + 1
    fmt = ClaudeCodeFormat(tmp_path / "claude")
    paths = [transcript(3 + n % 4).write(tmp_path / "claude") for n in range(count)]
    spilled, in_memory = index_of(tmp_path, "spilled"), index_of(tmp_path, "memory")
    reads = [read_file(fmt, str(path), None, spilled) for path in paths]
    assert all(isinstance(read.update.nodes, NodeSpill) for read in reads)
    assert spilled.put(reads) == []
    assert in_memory.put([read_file(fmt, str(path), None, None) for path in paths]) == []
    assert nodes(spilled.path) == nodes(in_memory.path)
    assert len(spilled.sessions()) == count
    assert spills(spilled.path.parent) == []


def test_a_repeated_key_after_the_window_spilled_reads_the_file_with_the_general_walk(tmp_path):
    t = transcript()
    lines = t.lines()
    path = t.write(tmp_path / "claude", extra=[lines[1]])  # the second record again, long after it spilled
    index = index_of(tmp_path, "data")
    read = read_file(ClaudeCodeFormat(tmp_path / "claude"), str(path), None, index)
    assert read.update.nodes == ()  # a disordered file keeps no keys: it is read whole when it grows
    assert index.put([read]) == []
    (session,) = index.sessions()
    whole = read_whole(ClaudeCodeFormat(tmp_path / "claude"), str(path))
    assert whole is not None
    assert tuple(said.message for said in index.messages(session.pk)) == whole.messages
    assert spills(index.path.parent) == []


def test_a_cancelled_read_removes_its_spill(tmp_path):
    path = transcript().write(tmp_path / "claude")
    index = index_of(tmp_path, "data")
    cancel = threading.Event()
    cancel.set()  # the projector (and its spill) is made, then the read stops before its first block
    with pytest.raises(ReadCancelled):
        read_file(ClaudeCodeFormat(tmp_path / "claude"), str(path), None, index, cancel)
    assert spills(index.path.parent) == []


def test_spills_of_processes_that_are_gone_are_swept_and_others_kept(tmp_path):
    folder = tmp_path / "sources"
    mine = NodeSpill.create(folder)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    orphan = folder / f"spill-{int(dead.stdout)}-x.sqlite3"
    orphan.write_bytes(b"")
    sweep(folder, process_alive)
    assert spills(folder) == [Path(mine.path).name]
    mine.discard()
    assert spills(folder) == []


def test_a_build_in_worker_processes_spills_a_large_file_and_leaves_no_spill(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "POOL_BYTES", 0)  # worker processes for any amount
    base, data = tmp_path / "claude", tmp_path / "data"
    large = ClaudeTranscript()
    for turn in range(30):
        large.user(f"question {turn}")
        (call,) = large.reply(("tool_use", "Bash"))
        large.tool_result(call, "o" * 150_000)  # over 4 MiB in all: a worker spills its keys
        large.reply(("text", f"answer {turn}"))
    paths = [large.write(base), transcript().write(base)]
    assert os.path.getsize(paths[0]) >= 4 * 1024 * 1024  # the workers' own KEYED_BYTES (not patched there)
    index = SourceIndex(index_path(data), "claude-code", 1)
    source = TranscriptSource("claude-code", ClaudeCodeFormat(base), index)
    source.build_index()
    for path in paths:
        whole = read_whole(ClaudeCodeFormat(base), str(path))
        assert whole is not None
        (session,) = [s for s in index.sessions() if s.path == str(path)]
        assert tuple(said.message for said in index.messages(session.pk)) == whole.messages
    keyed = [row for row in nodes(index.path) if row[3] is not None]
    assert len(keyed) >= 30 * 4  # the large file's chain, placed
    assert spills(index.path.parent) == []
    source.close()
