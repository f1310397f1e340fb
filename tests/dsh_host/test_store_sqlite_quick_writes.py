"""Quick writes: the SQLite store writes a short batch on the calling thread when nothing is in its
way (`append_now`), and the session registry flushes that way on the event loop's thread, handing
the write to a worker thread only when the store declines."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from dsh_host import Event, QuickLeasingStore, Session, SessionHeader, SqliteSessionStore, StoreError, hookimpl
from dsh_host.hookspecs import StoreFactory
from dsh_host.store.sqlite.connection import WriterBusy, _is_busy
from dsh_host.store.sqlite.store import QUICK_BYTES, QUICK_EVENTS

USER = {"kind": "user"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    opened = SqliteSessionStore.open(tmp_path / "sessions.sqlite3")
    yield opened
    opened.close()


def turn(session: Session, text: str = "hello", chunks: int = 0) -> list[Event]:
    """Append one turn of `chunks` stream chunks to `session`; its events, not yet flushed."""
    number = session.last_turn_number() + 1
    session.append("turn/start", {"turn": number, "trigger": {"kind": "message", "source": USER}})
    session.append("user/message", {"content": [{"type": "text", "text": text}], "source": USER}, surface_op="append")
    session.append("step/start", {"turn": number, "step": 1})
    for i in range(chunks):
        session.append("assistant/chunk", {"turn": number, "step": 1, "chunk": {"type": "text-delta", "text": f" {i}"}})
    session.append("step/end", {"turn": number, "step": 1})
    session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
    batch = session.pending
    session.mark_flushed(len(batch))
    return batch


def stored_types(store: SqliteSessionStore, session_id: str) -> list[str]:
    return [event.type for event in store.read_events(session_id)[1]]


def other_writer(path: Path) -> sqlite3.Connection:
    """Another connection (another process, as far as SQLite can tell) holding the write lock."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_the_sqlite_store_is_a_quick_leasing_store(store):
    assert isinstance(store, QuickLeasingStore)


def test_a_quick_write_is_declined_with_nothing_written_while_another_writer_holds_the_database(store):
    session = Session(SessionHeader(id="s", created_at=0))
    lease = store.lease("s")
    assert lease.append_now(session.header, turn(session)) is True
    assert stored_types(store, "s") == ["turn/start", "user/message", "step/start", "step/end", "turn/end"]

    second = turn(session, "again")
    other = other_writer(store.path)
    assert lease.append_now(session.header, second) is False  # at once: its busy timeout is 0
    assert len(stored_types(store, "s")) == 5
    other.execute("ROLLBACK")
    other.close()

    assert lease.append_now(session.header, second) is True  # nothing of the declined try was kept
    assert len(stored_types(store, "s")) == 10
    lease.release()


def test_a_batch_too_large_to_be_quick_is_declined_and_written_by_append(store):
    session = Session(SessionHeader(id="s", created_at=0))
    many = turn(session, chunks=QUICK_EVENTS)
    assert store.append_now(session.header, many) is False
    assert not store.has("s")
    store.append(session.header, many)

    big = turn(session, "x" * QUICK_BYTES)
    assert len(big) <= QUICK_EVENTS and store.append_now(session.header, big) is False
    store.append(session.header, big)
    assert len(stored_types(store, "s")) == len(many) + len(big)


def test_a_quick_write_fails_as_append_does_and_leaves_the_store_writable(store):
    session = Session(SessionHeader(id="s", created_at=0))
    first, second = turn(session), turn(session)
    with pytest.raises(StoreError, match="is not stored; its first batch must start at seq 0"):
        store.append_now(session.header, second)
    assert not store.has("s")
    assert store.append_now(session.header, first) is True  # the failed write let its locks go
    store.append(session.header, second)
    assert len(stored_types(store, "s")) == 10


def test_quick_writes_leave_checkpoints_to_the_next_ordinary_write(store):
    # A quick commit never checkpoints (that syncs to disk): its pages stay in the log until
    # quick writes have added about SQLite's own threshold (1,000 pages), after which they are
    # declined, and the ordinary write that takes over copies the log into the database file.
    session = Session(SessionHeader(id="s", created_at=0))
    database = store.path
    written = 0
    while store.append_now(session.header, batch := turn(session, "y" * (QUICK_BYTES // 4))):
        written += 1
        assert written < 40
    assert written >= 10  # about 4 MB went into the log first
    assert database.stat().st_size < 1 << 20

    store.append(session.header, batch)
    assert database.stat().st_size > 3 << 20
    assert store.append_now(session.header, turn(session)) is True
    assert len(stored_types(store, "s")) == 5 * (written + 2)


def test_sqlite_busy_is_recognised_by_its_code_and_by_its_message_where_python_gives_no_code():
    coded = sqlite3.OperationalError("database is locked")
    coded.sqlite_errorcode = 517  # type: ignore[attr-defined]  # SQLITE_BUSY_SNAPSHOT
    assert _is_busy(coded)
    assert _is_busy(sqlite3.OperationalError("database is locked"))
    assert not _is_busy(sqlite3.OperationalError("no such table: events"))
    assert not _is_busy(WriterBusy())


# -- the session registry ----------------------------------------------------------------------------


class RecordingStore(SqliteSessionStore):
    """The SQLite store, noting which thread ran each write and whether a quick one was done."""

    def __init__(self, path: Path, progress: object = None) -> None:
        super().__init__(path)
        self.writes: list[tuple[str, int, bool]] = []
        self.appending = threading.Event()

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        self.writes.append(("append", threading.get_ident(), True))
        self.appending.set()
        super().append(header, events)

    def append_now(self, header: SessionHeader, events: Sequence[Event]) -> bool:
        done = super().append_now(header, events)
        self.writes.append(("append_now", threading.get_ident(), done))
        return done


class RecordingStores:
    @hookimpl
    def dsh_register_stores(self, register: Callable[[str, StoreFactory], None]) -> None:
        register("recording", lambda host, table: RecordingStore.open(host.data_dir / "recording.sqlite3"))


async def test_a_flush_is_written_on_the_loops_thread_unless_another_writer_is_in_its_way(make_host, tmp_path):
    host = make_host(objects={"recording": RecordingStores()}, config={"host": {"store": "recording"}})
    store = host.store
    assert isinstance(store, RecordingStore)
    loop_thread = threading.get_ident()
    session = host.sessions.create(str(tmp_path))
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})

    await host.sessions.flush(session)  # the first: the lease is taken and the batch written here
    assert store.writes == [("append_now", loop_thread, True)]

    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    other = other_writer(store.path)
    flushing = asyncio.ensure_future(host.sessions.flush(session))
    # The worker thread waits for the other writer; the loop does not.
    assert await asyncio.to_thread(store.appending.wait, 10)
    assert not flushing.done()
    other.execute("COMMIT")
    other.close()
    await flushing

    (declined, by_worker) = store.writes[1:]
    assert declined == ("append_now", loop_thread, False)
    assert by_worker[0] == "append" and by_worker[1] != loop_thread
    assert stored_types(store, session.id) == ["turn/start", "turn/end"]
    await host.sessions.release(session.id)
