"""Building the index: one builder per data dir, interrupted builds that go on, cancels, private files, upgrades."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsh_host.sources import IndexedSource
from dsh_sources import build, workers
from dsh_sources.build import BuildLock
from dsh_sources.claude_code import ClaudeCodeFormat
from dsh_sources.index import SourceIndex, index_path
from dsh_sources.source import TranscriptSource
from tests.dsh_sources.builders import ClaudeTranscript
from tests.stalled_pipe import WAIT_SECONDS, poll_until

pytestmark = pytest.mark.foreign_logs


def write_sessions(base: Path, count: int, *, turns: int = 1, pad: int = 0) -> list[Path]:
    paths = []
    for n in range(count):
        t = ClaudeTranscript()
        for turn in range(turns):
            t.user(f"question {n}.{turn} " + "x" * pad)
            t.reply(("text", f"answer {n}.{turn}"))
        paths.append(t.write(base))
    return paths


def source_on(data: Path, base: Path, projection: int = 1) -> TranscriptSource:
    index = SourceIndex(index_path(data), "claude-code", projection)
    return TranscriptSource("claude-code", ClaudeCodeFormat(base), index)


def indexed_files(data: Path) -> int:
    with sqlite3.connect(index_path(data)) as conn:
        return int(conn.execute("SELECT count(*) FROM files").fetchone()[0])


BUILD_SCRIPT = """
import sqlite3, sys, threading
from pathlib import Path
from dsh_sources import build
from dsh_sources.claude_code import ClaudeCodeFormat
from dsh_sources.index import SourceIndex, index_path
from dsh_sources.source import TranscriptSource
build.BATCH_FILES = 5  # commit every five files
read, count = build.read_file, [0]
def committed():
    with sqlite3.connect(index_path(data)) as conn:
        return conn.execute("SELECT count(*) FROM files").fetchone()[0]
def stalling(*args, **kwargs):
    count[0] += 1
    if count[0] > 25:  # the 26th read never ends: the kill lands after 25 files, 5 commits
        while committed() < 25:  # the writer thread commits the fifth batch
            threading.Event().wait(0.01)
        Path(sys.argv[3]).touch()
        threading.Event().wait()
    return read(*args, **kwargs)
build.read_file = stalling
data, base = Path(sys.argv[1]), Path(sys.argv[2])
source = TranscriptSource("claude-code", ClaudeCodeFormat(base), SourceIndex(index_path(data), "claude-code", 1))
source.build_index()
"""


def test_a_killed_build_keeps_what_it_committed_and_the_next_one_goes_on(tmp_path):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 100)
    stalled = tmp_path / "stalled"
    builder = subprocess.Popen([sys.executable, "-c", BUILD_SCRIPT, str(data), str(base), str(stalled)])
    try:
        poll_until(stalled.exists, "the build stalled after 25 files")
        builder.send_signal(signal.SIGKILL)
    finally:
        builder.wait()
    kept = indexed_files(data)
    assert kept == 25
    source = source_on(data, base)
    progress = source.build_index()
    assert progress.complete and progress.files_total == 100 - kept  # only what the killed build had not committed
    assert len(source.list_sessions()) == 100
    source.close()


def test_a_second_builder_never_waits_and_answers_from_what_is_committed(tmp_path):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 3)
    first = source_on(data, base)
    first.build_index()
    write_sessions(base, 2)
    lock = BuildLock(index_path(data).parent / "build-claude-code.lock")
    assert lock.acquire()  # another process's build, as far as the lock file tells
    try:
        second = source_on(data, base)
        assert isinstance(second, IndexedSource)
        second.build_index()  # returns at once: the other holds the lock
        assert len(second.list_sessions()) == 3
    finally:
        lock.release()
    assert len(second.list_sessions()) == 5
    first.close()
    second.close()


def test_a_closed_source_stops_its_background_build_and_its_workers(tmp_path, monkeypatch):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 300, turns=2, pad=4000)
    monkeypatch.setattr(build, "POOL_BYTES", 0)  # worker processes for any amount
    started = threading.Event()
    spawned: list[workers.Workers] = []
    real = workers.Workers

    class Watched(real):  # type: ignore[misc, valid-type]
        def __init__(self, count: int) -> None:
            super().__init__(count)
            spawned.append(self)
            started.set()

    monkeypatch.setattr(build, "Workers", Watched)
    source = source_on(data, base)
    source.build_index(background=True)
    assert started.wait(WAIT_SECONDS)
    before = time.monotonic()
    source.close()
    assert time.monotonic() - before < 2.0
    assert all(process.poll() is not None for process in spawned[0]._processes)


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_the_index_folder_and_files_are_private_whatever_the_umask(tmp_path, umask):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 2)
    script = (
        "import os, sys\n"
        f"os.umask({umask})\n"
        "from pathlib import Path\n"
        "from dsh_sources.claude_code import ClaudeCodeFormat\n"
        "from dsh_sources.index import SourceIndex, index_path\n"
        "from dsh_sources.source import TranscriptSource\n"
        "data, base = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "s = TranscriptSource('claude-code', ClaudeCodeFormat(base), SourceIndex(index_path(data), 'claude-code', 1))\n"
        "s.build_index()\n"
        "folder = index_path(data).parent\n"
        "print(oct(folder.stat().st_mode & 0o777))\n"
        "for entry in sorted(folder.iterdir()):\n"
        "    print(entry.name, oct(entry.stat().st_mode & 0o777))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(data), str(base)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    folder_mode, *entries = out.stdout.splitlines()
    assert folder_mode == "0o700"
    names = {line.split()[0] for line in entries}
    assert {"index.sqlite3", "index.sqlite3-wal", "build-claude-code.lock"} <= names
    assert all(line.endswith(" 0o600") for line in entries), entries


def test_an_index_of_an_earlier_version_is_replaced_and_files_are_read_again(tmp_path):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 2)
    data.mkdir()
    legacy = data / "sources.sqlite3"
    with sqlite3.connect(legacy) as conn:  # the index before read state: size and mtime per file
        conn.execute("CREATE TABLE files (pk INTEGER PRIMARY KEY, source TEXT, path BLOB, size INTEGER)")
    source = source_on(data, base)
    assert not legacy.exists()
    assert len(source.list_sessions()) == 2
    source.close()
    with sqlite3.connect(index_path(data)) as conn:
        conn.execute("PRAGMA user_version = 1")  # a schema this code does not know
    again = source_on(data, base)
    assert again.build_index().files_total == 2  # every file read again into the new schema
    again.close()


def test_a_new_projection_version_reads_the_files_again(tmp_path):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 3)
    first = source_on(data, base)
    assert first.build_index().files_total == 3
    first.close()
    same = source_on(data, base)
    assert same.build_index().files_total == 0
    same.close()
    newer = source_on(data, base, projection=2)
    assert newer.build_index().files_total == 3
    assert len(newer.list_sessions()) == 3
    newer.close()


def test_a_session_not_indexed_yet_is_read_from_its_own_file(tmp_path):
    base, data = tmp_path / "claude", tmp_path / "data"
    (path,) = write_sessions(base, 1)
    source = source_on(data, base)
    surface = source.read_surface(f"claude-code:{path.stem}")  # no listing, no build first
    assert [event["type"] for event in surface.events] == ["user/message", "assistant/message"]
    assert indexed_files(data) == 1
    source.close()


def test_vanished_files_leave_the_index(tmp_path):
    base, data = tmp_path / "claude", tmp_path / "data"
    paths = write_sessions(base, 3)
    source = source_on(data, base)
    assert len(source.list_sessions()) == 3
    os.unlink(paths[0])
    source.refresh()
    assert len(source.list_sessions()) == 2
    assert indexed_files(data) == 2
    source.close()


def test_a_background_build_says_so_at_once_and_a_source_waiting_for_another_closes_at_once(tmp_path, monkeypatch):
    base, data = tmp_path / "claude", tmp_path / "data"
    write_sessions(base, 2)
    first, second = source_on(data, base), source_on(data, base)
    slot = build._slot(index_path(data))
    slot.acquire()  # this process's other source is building
    try:
        assert second.build_index(background=True).building  # told at once, before its thread has listed
        before = time.monotonic()
        second.close()  # waiting for the slot, it still closes at once
        assert time.monotonic() - before < 1.0
    finally:
        slot.release()
    assert first.build_index().complete
    first.close()
