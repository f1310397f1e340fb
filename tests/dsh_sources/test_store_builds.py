"""A store's read (OpenCode's database) is written as it goes: in a worker when it is large, in batches.

A store of `build.POOL_BYTES` or more is read by the worker processes, each its share of the
sessions (`deal`), while the builder writes the sessions they hand over; whichever processes read
it, the index holds the same, and readers that saw different stores end the read as an interrupted one. The sessions are
written in batches, so a read cancelled midway keeps what it wrote, and the next read hands over
only the sessions it had not reached.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_sources import build, stores
from dsh_sources.build import end_idle_workers
from dsh_sources.transcript import SessionRead, deal
from tests.dsh_sources.opencode_builders import DatabaseWriter, opencode_source

pytestmark = pytest.mark.foreign_logs

SESSIONS = 6


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "opencode"
    folder.mkdir()
    db = DatabaseWriter(folder / "opencode.db")
    for number in range(SESSIONS):
        sid = db.session(f"/work/{number}", f"task {number}")
        prompt = db.user(sid, f"prompt {number}")
        db.assistant(sid, prompt, (f"answer {number}", "and more"), tool_output="x" * 2000)
    db.close()
    return folder


def indexed(source) -> dict[str, tuple[str | None, list[tuple[str, tuple[str, ...]]]]]:
    """Every session the source's index holds: its title and messages, by agent id."""
    out = {}
    for entry in source.index.sessions():
        said = source.index.messages(entry.pk)
        out[entry.agent_id] = (entry.title, [(s.message.role, s.message.texts) for s in said])
    return out


def build_once(base: Path, index: Path, cancel: threading.Event | None = None):
    source = opencode_source(base, index)
    source._builder.run(cancel or threading.Event(), lambda progress: None)
    return source


def test_a_large_store_is_read_by_the_workers_and_indexed_as_a_read_in_process(base, tmp_path, monkeypatch):
    in_process = build_once(base, tmp_path / "here" / "index.sqlite3")
    expected = indexed(in_process)
    in_process.close()
    assert len(expected) == SESSIONS
    monkeypatch.setattr(build, "POOL_BYTES", 0)
    local_reads: list[str] = []
    read = build.Workers.read_store

    def noting(self, fmt, path, marks, add, cancel):  # only a worker's read goes through here
        local_reads.append(path)
        return read(self, fmt, path, marks, add, cancel)

    monkeypatch.setattr(build.Workers, "read_store", noting)
    try:
        in_worker = build_once(base, tmp_path / "there" / "index.sqlite3")
        assert local_reads == [str(base / "opencode.db")]
        assert indexed(in_worker) == expected
        in_worker.close()
    finally:
        end_idle_workers()


class CancelledAfterSessions(threading.Event):
    """A cancel that comes once `count` sessions were handed over (the test counts them)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.left = count

    def handed(self, session: SessionRead) -> None:
        self.left -= 1
        if self.left <= 0:
            self.set()


@pytest.mark.parametrize("in_worker", [False, True], ids=["in-process", "in-worker"])
def test_a_cancelled_store_read_keeps_the_sessions_it_wrote_and_the_next_reads_only_the_rest(
    base, tmp_path, monkeypatch, in_worker
):
    monkeypatch.setattr(stores, "STORE_BATCH_BYTES", 0)  # every session is a batch of its own
    if in_worker:
        monkeypatch.setattr(build, "POOL_BYTES", 0)
    index = tmp_path / "index" / "index.sqlite3"
    cancel = CancelledAfterSessions(2)
    handed: list[str] = []
    read_store = stores.read_store

    def noting(fmt, path, marks, add, cancel_, size):
        def counted(session, rows):
            handed.append(session.agent_id)
            add(session, rows)
            cancel.handed(session)

        return read_store(fmt, path, marks, counted, cancel_, size)

    monkeypatch.setattr(stores, "read_store", noting)
    try:
        first = build_once(base, index, cancel)
        kept = set(indexed(first))
        first.close()
        # A worker may hand over more before the builder sees the cancel; what was handed is written.
        assert 2 <= len(kept) < SESSIONS and kept == set(handed)
        handed.clear()
        cancel = CancelledAfterSessions(SESSIONS + 1)
        second = build_once(base, index)
        assert set(handed) == set(indexed(second)) - kept  # only the sessions the first read had not reached
        assert len(indexed(second)) == SESSIONS
        assert not second.problems()
        second.close()
    finally:
        end_idle_workers()


@given(
    weights=st.dictionaries(st.text(max_size=4), st.integers(min_value=-3, max_value=50), max_size=30),
    readers=st.integers(min_value=1, max_value=4),
)
def test_the_shares_of_a_store_hold_each_session_once(weights, readers):
    items = list(weights.items())
    shares = [deal(items, (number, readers)) for number in range(readers)]
    assert sorted(key for share in shares for key in share) == sorted(weights)
    assert deal(list(reversed(items)), (0, readers)) == shares[0]  # the order they were seen in does not matter


def test_readers_that_saw_different_stores_end_the_read_as_an_interrupted_one(base, tmp_path, monkeypatch):
    monkeypatch.setattr(build, "POOL_BYTES", 0)
    read = build.Workers.read_store

    def one_saw_a_change(self, fmt, path, marks, add, cancel):
        reads = read(self, fmt, path, marks, add, cancel)
        return [reads[0], dataclasses.replace(reads[1], marks={**reads[1].marks, "ses_new": "0"})]

    monkeypatch.setattr(build.Workers, "read_store", one_saw_a_change)
    index = tmp_path / "index" / "index.sqlite3"
    store = str(base / "opencode.db")
    try:
        first = build_once(base, index)
        assert len(indexed(first)) == SESSIONS  # every share was read and written
        assert first.index.store_state(store)["signature"] is None  # but the read did not end: checked again
        first.close()
        monkeypatch.setattr(build.Workers, "read_store", read)
        second = build_once(base, index)
        assert second.index.store_state(store)["signature"] is not None
        assert len(indexed(second)) == SESSIONS
        second.close()
    finally:
        end_idle_workers()


def test_a_store_whose_worker_died_is_read_in_the_builders_process(base, tmp_path, monkeypatch):
    monkeypatch.setattr(build, "POOL_BYTES", 0)
    read = build.Workers.read_store

    def one_dead(self, fmt, path, marks, add, cancel):
        self._processes[1].kill()
        self._processes[1].wait()
        return read(self, fmt, path, marks, add, cancel)

    monkeypatch.setattr(build.Workers, "read_store", one_dead)
    try:
        source = build_once(base, tmp_path / "index" / "index.sqlite3")
        assert len(indexed(source)) == SESSIONS
        assert source.index.store_state(str(base / "opencode.db"))["signature"] is not None
        source.close()
    finally:
        end_idle_workers()


def test_reading_a_changed_store_again_and_again_leaves_no_connection_open(base, tmp_path):
    """Each read writes on a thread of its own; the thread's connection to the index ends with it."""
    source = build_once(base, tmp_path / "index" / "index.sqlite3")
    db = DatabaseWriter(base / "opencode.db", seed=1)  # ids of its own beside the fixture's
    sid = db.session("/work/live", "live")
    before = len(os.listdir("/proc/self/fd"))
    for number in range(20):
        db.user(sid, f"prompt {number}")
        assert source._builder.update([str(base / "opencode.db")], threading.Event())
    assert len(os.listdir("/proc/self/fd")) - before < 5
    assert indexed(source)[sid][1][-1] == ("user", ("prompt 19",))
    db.close()
    source.close()
