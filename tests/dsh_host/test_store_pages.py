"""The stores' paged reads, on every store: the listing by last activity, a surface page, a log page.

Pages walked end to end give the whole ordered listing, surface or log, with nothing missing or
repeated under ties; each page is read by key or in index order, never by reading everything.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_host import SessionNotFound
from dsh_host.session.events import SessionHeader, surface_text
from dsh_host.session.snapshots import surface_entry
from dsh_host.store.base import SessionRow

# Its logs are built by hand (turnless fixtures, random logs), not written by dsh.
pytestmark = pytest.mark.foreign_logs

_runs = itertools.count()
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def by_activity(rows: list[SessionRow]) -> list[SessionRow]:
    return sorted(rows, key=lambda row: (-row.last_activity_at, row.id))


def walk_listing(store, limit: int, cwd: str | None) -> list[SessionRow]:
    walked: list[SessionRow] = []
    while True:
        after = (walked[-1].last_activity_at, walked[-1].id) if walked else None
        page = store.list_sessions_by_activity(limit, after, cwd)
        walked.extend(page)
        if len(page) < limit:
            return walked


def store_session(store, L, session_id: str, *, created: int, active: int | None, cwd: str | None) -> None:
    """A session created at `created` whose last event is at `active` (None: it has none)."""
    header = SessionHeader(id=session_id, created_at=created, cwd=cwd)
    raws = [] if active is None else [L.raw("turn/start", 0, time=active)]
    store.import_log(header, L.events(raws))


# -- the listing by last activity -------------------------------------------------------------------------


@given(
    sessions=st.lists(
        st.tuples(st.integers(0, 3), st.none() | st.integers(0, 3), st.sampled_from(["a", "b", None])),
        min_size=0,
        max_size=12,
    ),
    limit=st.integers(1, 5),
    names=st.randoms(use_true_random=False),
)
@PROPERTY
def test_pages_by_activity_walk_the_whole_ordered_listing(shared_store, log_builder, sessions, limit, names):
    run = next(_runs)
    ids = [f"{run}-{i}" for i in range(len(sessions))]
    names.shuffle(ids)  # ids that do not follow the creation order
    for session_id, (created, active, cwd) in zip(ids, sessions, strict=True):
        where = None if cwd is None else f"/{run}/{cwd}"
        store_session(shared_store, log_builder, session_id, created=created, active=active, cwd=where)
    everything = by_activity(shared_store.list_sessions())
    assert walk_listing(shared_store, limit, None) == everything
    for cwd in ("a", "b"):
        expected = [row for row in everything if row.cwd == f"/{run}/{cwd}"]
        assert walk_listing(shared_store, limit, f"/{run}/{cwd}") == expected


def test_last_activity_is_the_last_event_or_the_creation(store, log_builder):
    L = log_builder
    store_session(store, L, "quiet", created=50, active=None, cwd="/w")
    store_session(store, L, "busy", created=10, active=90, cwd="/w")
    store.append(L.header("busy", created_at=10, cwd="/w"), L.events([L.raw("turn/end", 1, time=95)]))
    store_session(store, L, "old", created=20, active=30, cwd="/v")
    rows = store.list_sessions_by_activity(10)
    assert [(row.id, row.last_activity_at) for row in rows] == [("busy", 95), ("quiet", 50), ("old", 30)]
    assert [row.id for row in store.list_sessions_by_activity(10, cwd="/v")] == ["old"]
    assert store.list_sessions_by_activity(10, cwd="/nowhere") == []
    assert sorted(store.list_cwds()) == ["/v", "/w"]


def test_any_string_is_a_cwd_to_filter_by(store, log_builder):
    odd = ["/a\ud800b", "/nul\x00", "/ü", "/a"]
    for i, cwd in enumerate(odd):
        store_session(store, log_builder, f"s{i}", created=i, active=None, cwd=cwd)
    store_session(store, log_builder, "none", created=9, active=None, cwd=None)
    for i, cwd in enumerate(odd):
        assert [row.id for row in store.list_sessions_by_activity(5, cwd=cwd)] == [f"s{i}"]
    assert sorted(store.list_cwds()) == sorted(odd)


@pytest.mark.parametrize(
    ("cwd", "index", "expected"),
    [
        (None, "sessions_by_activity", (398, 399, 396, 397, 394, 395, 392, 393)),
        ("/1", "sessions_by_cwd", (399, 397, 395, 393, 391, 389, 387, 385)),
    ],
)
def test_a_page_by_activity_is_the_next_stretch_of_its_index(store_backend, store, log_builder, cwd, index, expected):
    for i in range(400):  # enough in each cwd that reading one in index order is the plan to beat
        store_session(store, log_builder, f"s{i:03}", created=0, active=i // 2, cwd=f"/{i % 2}")
    store_backend.pad(10)  # tables of a real size, so the plan is the one a team's server runs
    pages = []
    with store_backend.trace(store) as traced:
        for _ in range(2):
            after = (pages[-1][-1].last_activity_at, pages[-1][-1].id) if pages else None
            pages.append(store.list_sessions_by_activity(4, after, cwd))
    assert [row.id for page in pages for row in page] == [f"s{i:03}" for i in expected]
    # No sort and no scan of the table: wherever it starts, a page costs what it holds.
    assert store_backend.index_ordered(store, traced, index)


# -- a surface page ---------------------------------------------------------------------------------------


def readable(snapshot) -> list[tuple]:
    """(seq, time, kind, text, source kind, source plugin) of a whole surface's readable entries."""
    out = []
    for event in snapshot.events:
        entry = surface_entry(0, event["seq"], event["time"], surface_text(event["type"], event.get("data")))
        if entry is not None:
            out.append((entry.seq, entry.time, entry.kind, entry.text, entry.source_kind, entry.source_plugin))
    return out


def walk_surface(store, session_id: str, limit: int) -> list:
    pages = [store.read_surface_page(session_id, None, limit)]
    while pages[-1].before is not None:
        pages.append(store.read_surface_page(session_id, pages[-1].before, limit))
    entries = [entry for page in reversed(pages) for entry in page.entries]
    assert all(len(page.entries) == limit for page in pages[:-1])
    assert all(page.before == page.entries[0].position for page in pages[:-1])
    return entries


def timed_log(L, draw) -> list[dict]:
    """A random valid log (`LogBuilder.draw_log`) whose events have times of their own, one ms apart."""
    raws, _, _ = L.draw_log(draw)
    return [{**raw, "time": 1000 + i} for i, raw in enumerate(raws)]


@given(data=st.data(), limit=st.integers(1, 6))
@PROPERTY
def test_surface_pages_walk_the_whole_readable_surface(shared_store, log_builder, data, limit):
    L = log_builder
    raws = timed_log(L, data.draw)
    session_id = f"surface-{next(_runs)}"
    shared_store.import_log(L.header(session_id), L.events(raws))
    entries = walk_surface(shared_store, session_id, limit)
    shown = [(e.seq, e.time, e.kind, e.text, e.source_kind, e.source_plugin) for e in entries]
    assert shown == readable(shared_store.read_surface(session_id))
    positions = [e.position for e in entries]
    assert positions == sorted(set(positions))


def test_a_surface_page_marks_checkpoints_and_steering_and_leaves_tools_out(store, log_builder):
    L = log_builder
    raws = [
        L.user(0, "first question"),
        L.assistant(1, "first answer"),
        L.user(2, "summary of it all", L.plugin("compact"), op=L.replace(0, 1), sources=[0, 1]),
        L.user(3, "next question"),
        L.assistant(4, [{"type": "tool-call", "id": "c", "name": "read", "arguments": "{}"}]),
        L.tool_result(5, "file text", call_id="c"),
        L.context(6, "injected", L.plugin("notes")),
        L.steering(7, "also this"),
        L.user(8, "review it", L.plugin("reviewer")),
        L.assistant(9, "done"),
    ]
    store.import_log(L.header("s"), L.events(raws))
    page = store.read_surface_page("s", None, 10)
    assert [(e.seq, e.kind, e.text, e.source_kind, e.source_plugin) for e in page.entries] == [
        (2, "checkpoint", "summary of it all", "plugin", "compact"),
        (3, "user", "next question", "user", None),
        (7, "steering", "also this", "user", None),
        (8, "user", "review it", "plugin", "reviewer"),
        (9, "assistant", "done", None, None),
    ]
    assert (page.session_id, page.before, page.captured_through_seq) == ("s", None, 9)
    older = store.read_surface_page("s", None, 2)
    assert [e.seq for e in older.entries] == [8, 9]
    assert [e.seq for e in store.read_surface_page("s", older.before, 2).entries] == [3, 7]


def titled(L, seq: int, title: str) -> dict:
    return L.raw("session/title", seq, {"title": title, "messageSeqs": [], "source": {"kind": "fallback"}}, time=seq)


@given(title=st.text(), cwd=st.none() | st.text())
@PROPERTY
def test_a_surface_page_carries_the_header_and_the_latest_title(shared_store, log_builder, title, cwd):
    L = log_builder
    session_id = f"titled-{next(_runs)}"
    header = SessionHeader(id=session_id, created_at=5, cwd=cwd)
    shared_store.import_log(header, L.events([L.user(0, "q"), titled(L, 1, "first"), titled(L, 2, title)]))
    page = shared_store.read_surface_page(session_id, None, 1)
    assert (page.header.id, page.header.created_at, page.header.cwd, page.title) == (session_id, 5, cwd, title)
    stored = (shared_store.read_header(session_id), shared_store.read_title(session_id).title)
    assert (page.header, page.title) == stored


def test_a_surface_page_sees_a_new_title_and_none_before_the_first(store, log_builder):
    L = log_builder
    header = L.header("s", created_at=3, cwd="/w")
    store.import_log(header, L.events([L.user(0, "q")]))
    page = store.read_surface_page("s", None, 5)
    assert (page.header, page.title) == (store.read_header("s"), None)
    assert (page.header.created_at, page.header.cwd) == (3, "/w")
    store.append(header, L.events([titled(L, 1, "named"), L.assistant(2, "a")]))
    page = store.read_surface_page("s", None, 5)
    assert (page.title, [e.text for e in page.entries]) == ("named", ["q", "a"])


def test_surface_text_any_string_survives_a_page(store, log_builder):
    L = log_builder
    texts = ["lone \ud800 surrogate", "nul \x00 byte", "plain"]
    store.import_log(L.header("s"), L.events([L.user(i, text) for i, text in enumerate(texts)]))
    assert [e.text for e in store.read_surface_page("s", None, 5).entries] == texts
    assert [e.text for e in store.read_surface_page("s", None, 1).entries] == ["plain"]


def test_a_page_of_an_empty_or_unknown_session(store, log_builder):
    store.import_log(log_builder.header("empty"), [])
    page = store.read_surface_page("empty", None, 5)
    assert (page.entries, page.before, page.captured_through_seq) == ((), None, None)
    events = store.read_events_page("empty", None, 5)
    assert (events.events, events.before_seq, events.captured_through_seq) == ((), None, None)
    for read in (store.read_surface_page, store.read_events_page):
        with pytest.raises(SessionNotFound, match='session "nope" not found'):
            read("nope", None, 5)


def test_a_surface_page_reads_its_rows_by_key(store_backend, store, log_builder):
    L = log_builder
    raws = []
    for _ in range(200):
        raws += [L.user(len(raws), "q"), L.chunk(len(raws) + 1), L.assistant(len(raws) + 2, "a")]
    store.import_log(L.header("big"), L.events(raws))
    store_backend.pad(20_000)  # tables of a real size, so the plan is the one a team's server runs
    with store_backend.trace(store) as traced:
        page = store.read_surface_page("big", None, 4)
    assert [(e.seq, e.text) for e in page.entries] == [(594, "q"), (596, "a"), (597, "q"), (599, "a")]
    accesses = store_backend.table_accesses(store, traced)
    assert accesses and all(store_backend.keyed(a) for a in accesses), accesses


# -- a log page -------------------------------------------------------------------------------------------


@given(events=st.integers(0, 30), limit=st.integers(1, 7))
@PROPERTY
def test_log_pages_walk_the_whole_log(shared_store, log_builder, events, limit):
    L = log_builder
    session_id = f"log-{next(_runs)}"
    raws = [L.chunk(seq, f"c{seq}") for seq in range(events)]
    shared_store.import_log(L.header(session_id), L.events(raws))
    pages = [shared_store.read_events_page(session_id, None, limit)]
    while pages[-1].before_seq is not None:
        pages.append(shared_store.read_events_page(session_id, pages[-1].before_seq, limit))
    walked = [event for page in reversed(pages) for event in page.events]
    _, lines = shared_store.read_lines(session_id)
    assert walked == [json.loads(line) for line in lines]
    assert all(page.captured_through_seq == (events - 1 if events else None) for page in pages)
    assert shared_store.read_events_page(session_id, events + 5, limit).events == pages[0].events


def test_the_distinct_cwds_cost_what_the_directories_are_not_the_sessions(tmp_path, log_builder) -> None:
    from dsh_host.store.sqlite import SqliteSessionStore

    def steps(sessions: int) -> int:
        """SQLite's virtual-machine steps (in tens) to read the cwds of `sessions` sessions in 3 directories."""
        store = SqliteSessionStore.open(tmp_path / f"{sessions}.sqlite3")
        for i in range(sessions):
            store_session(store, log_builder, f"s{i}", created=i, active=None, cwd=f"/{i % 3}")
        store_session(store, log_builder, "nowhere", created=0, active=None, cwd=None)
        counted = 0

        def count() -> int:
            nonlocal counted
            counted += 1
            return 0

        conn = store._connection()
        conn.set_progress_handler(count, 10)
        try:
            assert sorted(store.list_cwds()) == ["/0", "/1", "/2"]
        finally:
            conn.set_progress_handler(None, 0)
            store.close()
        return counted

    few, many = steps(6), steps(600)
    # One index seek per directory: a hundred times the sessions is not a hundred times the work.
    assert many <= 2 * few + 2, (few, many)
