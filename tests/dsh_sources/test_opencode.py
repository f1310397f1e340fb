"""The `opencode` source: OpenCode's database and older JSON folder, read in place and never written."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

import dsh_sources.opencode as plugin
from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.sources import SourceMessage
from dsh_sources.formats.opencode import OpenCodeFormat
from dsh_sources.lines import ReadCancelled
from tests.dsh_sources.conftest import tree_state
from tests.dsh_sources.opencode_builders import (
    DatabaseWriter,
    StorageWriter,
    listing,
    opencode_source,
    read_sessions,
)

pytestmark = pytest.mark.foreign_logs


def messages(source, session: str) -> list[tuple[str, tuple[str, ...]]]:
    said = source._conversation(f"opencode:{session}").messages
    return [("checkpoint" if m.source == COMPACT_CHECKPOINT_SOURCE else m.role, m.texts) for m in said]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "opencode"
    folder.mkdir()
    return folder


@pytest.fixture
def source(base: Path, tmp_path: Path):
    made = opencode_source(base, tmp_path / "index" / "index.sqlite3")
    yield made
    made.close()


def test_a_session_shows_what_was_typed_and_said_and_nothing_else(base, source):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/work/app", "Fix the parser")
    prompt = db.user(
        sid,
        "where is the parser?",
        synthetic=("Called the Read tool with the following input: lines.py",),
        ignored=("an ignored note",),
        extra=(
            {"type": "file", "mime": "text/plain", "filename": "lines.py", "url": "file:///work/app/lines.py"},
            {"type": "agent", "name": "general"},
            {"type": "subtask", "prompt": "look", "description": "look around", "agent": "general"},
        ),
    )
    db.assistant(sid, prompt, ("In lines.py.", "   "), reasoning="let me think", tool_output="lines.py\n")
    reply = db.message(
        sid,
        {"role": "assistant", "parentID": prompt, "modelID": "m2", "providerID": "p", "finish": "stop"},
        [
            {"type": "snapshot", "snapshot": "abc"},
            {"type": "patch", "hash": "abc", "files": ["lines.py"]},
            {"type": "retry", "attempt": 1, "error": {"name": "APIError"}, "time": {"created": 1}},
            {"type": "text", "text": "Done."},
        ],
    )
    assert reply
    rows = source.list_sessions()
    assert [(r.id, r.cwd, r.title) for r in rows] == [(f"opencode:{sid}", "/work/app", "Fix the parser")]
    assert messages(source, sid) == [
        ("user", ("where is the parser?",)),
        ("assistant", ("In lines.py.",)),
        ("assistant", ("Done.",)),
    ]
    said = source._conversation(f"opencode:{sid}").messages
    assert said[1].model == "claude-sonnet-4-5" and said[2].model == "m2"
    db.close()


def test_child_sessions_are_not_listed_and_titles_fall_back_to_the_first_prompt(base, source):
    db = DatabaseWriter(base / "opencode.db")
    root = db.session("/work/app", "")
    db.user(root, "  list the   files\nplease")
    child = db.session("/work/app", "look around (@general subagent)", parent=root)
    db.user(child, "look around")
    assert [(r.id, r.title) for r in source.list_sessions()] == [(f"opencode:{root}", "list the files please")]
    assert not source.has(f"opencode:{child}")
    db.close()


def compacted(db, sid: str, *, tail: bool, finish: str | None = "stop", error: dict | None = None) -> None:
    first = db.user(sid, "first prompt")
    db.assistant(sid, first, ("first reply",))
    second = db.user(sid, "second prompt")
    db.assistant(sid, second, ("second reply",))
    ask = db.compaction(sid, tail_start_id=second if tail else None)
    db.assistant(sid, ask, ("the summary",), summary=True, finish=finish, error=error)
    after = db.user(sid, "after the compaction")
    db.assistant(sid, after, ("last reply",))


def test_a_finished_compaction_is_a_checkpoint_that_cuts_what_came_before(base, source):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    compacted(db, sid, tail=False)
    assert messages(source, sid) == [
        ("checkpoint", ("the summary",)),
        ("user", ("after the compaction",)),
        ("assistant", ("last reply",)),
    ]
    db.close()


def test_a_compaction_tail_is_kept_after_the_summary(base, source):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    compacted(db, sid, tail=True)
    assert messages(source, sid) == [
        ("checkpoint", ("the summary",)),
        ("user", ("second prompt",)),
        ("assistant", ("second reply",)),
        ("user", ("after the compaction",)),
        ("assistant", ("last reply",)),
    ]
    db.close()


@pytest.mark.parametrize(
    "finish, error", [(None, None), ("stop", {"name": "APIError", "data": {"message": "overloaded"}})]
)
def test_an_unfinished_or_failed_compaction_cuts_nothing(base, source, finish, error):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    compacted(db, sid, tail=False, finish=finish, error=error)
    assert [texts for _, texts in messages(source, sid)] == [
        ("first prompt",),
        ("first reply",),
        ("second prompt",),
        ("second reply",),
        ("the summary",),
        ("after the compaction",),
        ("last reply",),
    ]
    db.close()


def test_columns_added_later_are_not_needed_and_missing_ones_read_as_nothing(base, source, tmp_path):
    later = DatabaseWriter(base / "opencode.db", later_columns=True)
    sid = later.session("/work/later", "later schema")
    later.user(sid, "hello")
    later.close()
    fork = DatabaseWriter(base / "opencode-dev.db", seed=7)
    other = fork.session("/work/fork", "fork schema")
    fork.user(other, "hi")
    fork.conn.execute("ALTER TABLE session DROP COLUMN directory")
    fork.close()
    rows = {r.id: (r.cwd, r.title) for r in source.list_sessions()}
    assert rows == {f"opencode:{sid}": ("/work/later", "later schema"), f"opencode:{other}": (None, "fork schema")}


def test_bad_rows_are_skipped_and_counted_and_never_stop_a_listing(base, source):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    prompt = db.user(sid, "kept prompt")
    db.assistant(sid, prompt, ("kept reply",))
    db.conn.execute('UPDATE part SET data = \'{"type": "text", "te\' WHERE id = (SELECT min(id) FROM part)')
    db.conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES "
        "('prt_zz1', ?, ?, 1, 1, '[1, 2]')",
        (prompt, sid),
    )
    db.conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES ('msg_zz', ?, 1, 1, 'garbage')",
        (sid,),
    )
    db.conn.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) "
        "VALUES (x'00', 'global', 's', '/', 't', 'v', 1, 1)"
    )
    assert [r.id for r in source.list_sessions()] == [f"opencode:{sid}"]
    assert messages(source, sid) == [("assistant", ("kept reply",))]
    reports = {(r.session_id, r.skipped) for r in source.check()}
    assert reports == {(f"opencode:{sid}", 3), (None, 1)}
    assert [(r.session_id, r.skipped) for r in source.check(f"opencode:{sid}")] == [(f"opencode:{sid}", 3)]
    db.close()


def test_each_part_comes_with_its_own_message_whatever_order_the_rows_were_written_in(base, source):
    db = DatabaseWriter(base / "opencode.db")
    sid, other = db.session("/w", "t"), db.session("/w", "other")
    first = db.user(sid, "first")
    second = db.assistant(sid, first, ("second",))
    third = db.user(sid, "third")
    foreign = db.user(other, "elsewhere")
    # the third is now older than the second, the second shares the first's time (then id orders),
    # and the other session's message is older than them all
    db.conn.execute("UPDATE message SET time_created = 5 WHERE id IN (?, ?)", (first, second))
    db.conn.execute("UPDATE message SET time_created = 4 WHERE id = ?", (third,))
    db.conn.execute("UPDATE message SET time_created = 3 WHERE id = ?", (foreign,))
    rows = [
        ("prt_0", second, '{"type": "text", "text": "second, again"}'),  # a part older than its message's others
        ("prt_1", foreign, '{"type": "text", "text": "of a message of another session"}'),
        ("prt_2", "msg_none", '{"type": "text", "text": "of no message"}'),
        ("prt_3", "msg_none", "not json"),
    ]
    for pid, mid, data in rows:
        db.conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, 1, 1, ?)",
            (pid, mid, sid, data),
        )
    db.close()
    assert messages(source, sid) == [
        ("user", ("third",)),
        ("user", ("first",)),
        ("assistant", ("second, again", "second")),
    ]
    assert [(r.session_id, r.skipped) for r in source.check(f"opencode:{sid}")] == [(f"opencode:{sid}", 1)]
    assert messages(source, other) == [("user", ("elsewhere",))]


def files(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """`tree_state` but for the -shm's bytes: the shared memory where every reader of a WAL database,
    OpenCode's own included, takes its read marks (the WAL's locking, not the database)."""
    return {name: (b"", *state[1:]) if name.endswith("-shm") else state for name, state in tree_state(folder).items()}


def test_the_database_is_read_without_creating_or_changing_a_file(base, source, tmp_path):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    db.user(sid, "while it runs")
    running = files(base)
    assert {"opencode.db-wal", "opencode.db-shm"} <= set(running)
    assert [r.id for r in source.list_sessions()] == [f"opencode:{sid}"]
    assert files(base) == running  # OpenCode running: the -wal's committed frames are read in place
    db.close()
    closed = tree_state(base)
    assert set(closed) == {"opencode.db"}
    source.refresh()
    assert messages(source, sid) == [("user", ("while it runs",))]
    assert tree_state(base) == closed  # closed: the file alone, opened immutable


def test_a_database_in_rollback_mode_is_read_without_creating_a_file(base, source):
    db = DatabaseWriter(base / "opencode.db")
    db.conn.execute("PRAGMA journal_mode = DELETE")  # OpenCode's fallback where WAL is unsupported
    sid = db.session("/w", "t")
    db.user(sid, "no wal here")
    assert set(listing(base)) == {"opencode.db"}
    assert messages(source, sid) == [("user", ("no wal here",))]
    db.user(sid, "written while open")
    source.refresh()
    assert messages(source, sid)[-1] == ("user", ("written while open",))
    assert set(listing(base)) == {"opencode.db"}
    db.close()


def test_a_wal_left_without_its_shm_is_read_from_a_private_copy(base, source, tmp_path):
    db = DatabaseWriter(base / "opencode.db")
    db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    sid = db.session("/w", "t")
    db.user(sid, "only in the wal")
    # What a killed OpenCode leaves: the file and its -wal, no -shm.
    shutil.copyfile(base / "opencode.db", tmp_path / "killed.db")
    shutil.copyfile(base / "opencode.db-wal", tmp_path / "killed.db-wal")
    db.close()
    for name in ("opencode.db", "opencode.db-wal"):
        shutil.copyfile(tmp_path / ("killed.db" + name.removeprefix("opencode.db")), base / name)
    left = tree_state(base)
    assert set(left) == {"opencode.db", "opencode.db-wal"}
    source.refresh()
    assert messages(source, sid) == [("user", ("only in the wal",))]
    assert tree_state(base) == left


def test_a_change_only_the_wal_shows_is_seen_and_only_changed_sessions_are_read_again(base, source):
    db = DatabaseWriter(base / "opencode.db")
    db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    quiet = db.session("/w", "quiet")
    db.user(quiet, "nothing more")
    busy = db.session("/w", "busy")
    db.user(busy, "first")
    source.refresh()
    reads: list[set[str]] = []
    read = source.format.read

    def read_noting(path, marks, sink, cancel=None):  # which sessions each read hands over
        reads.append(set())
        return read(path, marks, lambda session: reads[-1].add(session.agent_id) or sink(session), cancel)

    source.format.read = read_noting
    file_before = listing(base)["opencode.db"]
    db.user(busy, "second")
    assert listing(base)["opencode.db"] == file_before  # only the -wal changed
    source.refresh()
    assert reads == [{busy}]
    assert messages(source, busy) == [("user", ("first",)), ("user", ("second",))]
    db.conn.execute("DELETE FROM part WHERE session_id = ?", (quiet,))
    db.conn.execute("DELETE FROM message WHERE session_id = ?", (quiet,))
    db.conn.execute("DELETE FROM session WHERE id = ?", (quiet,))
    source.refresh()
    assert [r.title for r in source.list_sessions()] == ["busy"]
    db.close()


def test_a_locked_database_is_reported_and_its_sessions_stay_listed(base, source, monkeypatch):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    db.user(sid, "hello")
    source.refresh()
    monkeypatch.setattr("dsh_sources.formats.opencode_db.BUSY_SECONDS", 0.05)
    db.conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    db.user(sid, "written while it holds the file")  # the write takes the exclusive lock and keeps it
    source.refresh()
    assert [r.id for r in source.list_sessions()] == [f"opencode:{sid}"]
    problems = source.problems()
    assert len(problems) == 1 and "opencode.db" in problems[0] and "locked" in problems[0]
    db.close()
    source.refresh()
    assert source.problems() == []
    assert messages(source, sid)[-1] == ("user", ("written while it holds the file",))


@pytest.mark.parametrize("content", [b"not a database at all", b"SQLite format 3\x00" + b"\xff" * 5000])
def test_a_corrupt_database_is_reported_and_never_stops_a_listing(base, source, content):
    (base / "opencode.db").write_bytes(content)
    storage = StorageWriter(base / "storage")
    sid = storage.session("/work/old", "old one")
    storage.user(sid, "old prompt")
    assert [r.id for r in source.list_sessions()] == [f"opencode:{sid}"]
    problems = source.problems()
    assert len(problems) == 1 and "opencode.db" in problems[0]


def test_the_older_json_folder_is_read_and_the_database_wins_a_session_both_hold(base, source):
    storage = StorageWriter(base / "storage")
    both = storage.session("/work/app", "as migrated")
    storage.user(both, "the old copy")
    only_old = storage.session("/work/old", "only in storage")
    prompt = storage.user(only_old, "old prompt")
    storage.assistant(only_old, prompt, ("old reply",), reasoning="hidden")
    child = storage.session("/work/old", "a task (@general subagent)", parent=only_old)
    storage.user(child, "task")
    (base / "storage" / "message" / only_old / "msg_bad.json").write_text("[1]")
    (base / "storage" / "message" / only_old / "msg_gone.json").symlink_to(base / "vanished.json")  # gone mid-read
    (base / "storage" / "session" / "global" / "ses_notanobject.json").write_text('"a string"')
    assert {r.title for r in source.list_sessions()} == {"as migrated", "only in storage"}
    assert messages(source, only_old) == [("user", ("old prompt",)), ("assistant", ("old reply",))]
    db = DatabaseWriter(base / "opencode.db")  # the upgrade: the database takes the session over
    db.session("/work/app", "in the database", sid=both)
    db.user(both, "the database copy")
    source.refresh()
    assert {r.title for r in source.list_sessions()} == {"in the database", "only in storage"}
    assert messages(source, both) == [("user", ("the database copy",))]
    assert sorted((r.session_id or "", r.skipped) for r in source.check()) == [("", 1), (f"opencode:{only_old}", 2)]
    hits = source.search_candidates("copy", target_id=None, target_cwd=None, limit=10)
    assert [(h.id, h.snippet is not None) for h in hits] == [(f"opencode:{both}", True)]
    db.close()


def test_a_missing_folder_is_an_empty_source(tmp_path):
    missing = opencode_source(tmp_path / "nowhere", tmp_path / "index.sqlite3")
    assert missing.list_sessions() == [] and missing.check() == [] and missing.problems() == []
    missing.close()
    assert not (tmp_path / "nowhere").exists()


def test_the_plugin_looks_under_xdg_data_home_and_dir_overrides_it(make_host, tmp_path, monkeypatch):
    data = tmp_path / "xdg"
    db = DatabaseWriter((data / "opencode").mkdir(parents=True) or data / "opencode" / "opencode.db")
    sid = db.session("/work/xdg", "from xdg")
    db.user(sid, "hello")
    db.close()
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    host = make_host(objects={"opencode": plugin})
    rows = asyncio.run(host.services.session_query.list_sessions())
    assert [(r.id, r.title) for r in rows] == [(f"opencode:{sid}", "from xdg")]
    monkeypatch.delenv("XDG_DATA_HOME")
    assert plugin.home() == Path.home() / ".local" / "share" / "opencode"
    elsewhere = tmp_path / "elsewhere"
    other = make_host(
        objects={"opencode": plugin},
        config={"sources": {"opencode": {"dir": str(elsewhere)}}},
        data_dir=tmp_path / "d2",
    )
    assert asyncio.run(other.services.session_query.list_sessions()) == []
    assert other.sources.get("opencode").display_name == "OpenCode"
    assert any("does not exist" in line for _, line in other.sources.problems())


def test_a_checkpoint_is_a_source_message_of_the_compaction_kind(base, source):
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session("/w", "t")
    compacted(db, sid, tail=False)
    first = source._conversation(f"opencode:{sid}").messages[0]
    assert isinstance(first, SourceMessage) and first.role == "user" and first.source == COMPACT_CHECKPOINT_SOURCE
    db.close()


def test_a_database_that_is_not_yet_made_holds_no_session(base, source):
    sqlite3.connect(base / "opencode.db").close()  # an empty file: OpenCode has created it, not yet its tables
    assert source.list_sessions() == [] and source.problems() == []
    assert set(listing(base)) == {"opencode.db"}


def test_a_cancelled_read_stops_between_sessions_and_writes_nothing(base, source):
    for name, writer in (
        ("db", DatabaseWriter(base / "opencode.db")),
        ("storage", StorageWriter(base / "storage", seed=1)),
    ):
        sid = writer.session("/w", name)
        writer.user(sid, "hello")
    cancel = threading.Event()
    cancel.set()
    for path in source.format.stores():
        with pytest.raises(ReadCancelled):
            read_sessions(base, path, cancel=cancel)
    assert source._builder.run(cancel, lambda progress: None) and source.index.sessions() == []
    assert not source._builder.update(list(source.format.stores()), cancel) and source.index.sessions() == []
    assert len(source.list_sessions()) == 2


class CancelledAfter(threading.Event):
    """An event that is set from its `checks`-th look on: a cancel that comes while a read is under way."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks = checks

    def is_set(self) -> bool:
        self.checks -= 1
        return self.checks <= 0


@pytest.mark.parametrize("store", ["db", "storage"])
def test_a_cancelled_read_stops_between_the_messages_of_a_session(base, store):
    writer = DatabaseWriter(base / "opencode.db") if store == "db" else StorageWriter(base / "storage")
    sid = writer.session("/w", "long")
    for number in range(5):
        writer.user(sid, f"prompt {number}")
    path = next(OpenCodeFormat(base).stores())
    assert read_sessions(base, path, cancel=CancelledAfter(7))[1][sid].facts.messages == 5
    with pytest.raises(ReadCancelled):
        read_sessions(base, path, cancel=CancelledAfter(4))  # the session's look, then the third message's


def test_an_unchanged_older_folder_is_checked_without_writing_the_index(base, source):
    storage = StorageWriter(base / "storage")
    sid = storage.session("/w", "old")
    storage.user(sid, "first")
    source.refresh()
    stamp = source.index.stamp()
    source.refresh()
    assert source.index.stamp() == stamp
    storage.user(sid, "second")
    source.refresh()
    assert source.index.stamp() != stamp and messages(source, sid)[-1] == ("user", ("second",))


def test_a_session_under_two_projects_of_the_older_folder_is_read_once_from_the_first(base, source):
    storage = StorageWriter(base / "storage")
    sid = storage.session("/work/app", "first project's")
    storage.user(sid, "the prompt")
    second = base / "storage" / "session" / "zzz-later-project"
    second.mkdir()
    info = json.loads((base / "storage" / "session" / "global" / f"{sid}.json").read_text())
    (second / f"{sid}.json").write_text(json.dumps({**info, "title": "second project's"}))
    assert [(r.id, r.title) for r in source.list_sessions()] == [(f"opencode:{sid}", "first project's")]
    storage.user(sid, "a second prompt")
    source.refresh()
    assert [r.title for r in source.list_sessions()] == ["first project's"]
    assert messages(source, sid)[-1] == ("user", ("a second prompt",))
