"""The query service's paged reads: the listing by last activity merged across the store, the live
sessions and a source, keyset-paged; a session's surface and log a page at a time.

The source is the documented minimal one (`examples/notes_source.py`), which pages nothing itself:
its pages are cut from its listing and surface. dsh-sources' paged sources are tested with it.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_host import SessionNotFound, StoredTitle
from dsh_host.page_reads import activity, decode_cursor, encode_cursor
from dsh_host.paging import AgentInfo, InvalidPageRequest
from dsh_host.session.events import SessionHeader
from examples.notes_source import NotesPlugin
from tests.dsh_host.test_sources_seam import run
from tests.dsh_host.test_store_pages import readable, timed_log, titled

# Its logs are built by hand (random logs, turnless fixtures), not written by dsh.
pytestmark = pytest.mark.foreign_logs

_runs = itertools.count()
PROPERTY = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def host(make_host, tmp_path):
    """A host mounting the notes source on an empty folder, `tmp_path / "notes"`."""
    (tmp_path / "notes").mkdir()
    return make_host(objects={"notes": NotesPlugin()}, config={"sources": {"notes": {"dir": str(tmp_path / "notes")}}})


@pytest.fixture
def notes(host, tmp_path) -> Path:
    return tmp_path / "notes"


def walk(query, limit: int, **filters) -> list:
    """Every record, page after page (and each page's `next` leads to the next)."""
    records: list = []
    after = None
    while True:
        page = run(query.list_page(after=after, limit=limit, **filters))
        records.extend(page.records)
        if page.next is None:
            return records
        assert len(page.records) == limit
        after = page.next


def ordered(records) -> list:
    return sorted(records, key=lambda r: (-activity(r), r.id))


def note(folder: Path, name: str, at_ms: int) -> None:
    path = folder / name
    path.write_text(f"Note {name}\nbody", encoding="utf-8")
    os.utime(path, ns=(0, at_ms * 1_000_000))


# -- the listing ----------------------------------------------------------------------------------------


@given(
    stored=st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["/a", "/b", None]), st.booleans()), max_size=8),
    live=st.lists(st.integers(1, 4), max_size=3),
    noted=st.lists(st.integers(1, 4), max_size=3),
    limit=st.integers(1, 4),
)
@PROPERTY
def test_pages_walk_store_live_and_source_sessions_in_one_order(host, notes, log_builder, stored, live, noted, limit):
    L = log_builder
    run_id = next(_runs)
    for i, (at, cwd, resumed) in enumerate(stored):
        header = SessionHeader(id=f"{run_id}-s{i}", created_at=0, cwd=cwd)
        host.store.import_log(header, L.events([{**L.user(0), "time": at}]))
        if resumed:  # live, and active since it was stored
            run(host.sessions.resume(header.id)).append_raw({**L.user(1), "time": at + 2})
    for i, at in enumerate(live):
        host.sessions.create("/a", f"{run_id}-l{i}", created_at=at)
    for i, at in enumerate(noted):
        note(notes, f"{run_id}-n{i}.md", at)
    query = host.services.session_query
    everything = ordered(run(query.list_sessions()))
    assert walk(query, limit) == everything
    assert walk(query, limit, agent="dsh") == [r for r in everything if r.source is None]
    assert walk(query, limit, agent="notes") == [r for r in everything if r.source == "notes"]
    for cwd in ("/a", str(notes)):
        assert walk(query, limit, cwd=cwd) == [r for r in everything if r.cwd == cwd]
    assert query.list_page_now(limit=limit) == run(query.list_page(limit=limit))


def test_a_live_session_is_listed_once_at_its_live_activity(host, log_builder):
    L = log_builder
    query = host.services.session_query
    for session_id, at in (("stale", 5), ("other", 7)):
        host.store.import_log(
            SessionHeader(id=session_id, created_at=1, cwd="/w"), L.events([{**L.user(0), "time": at}])
        )
    session = run(host.sessions.resume("stale"))
    session.append_raw({**L.user(1), "time": 9})  # newer than anything stored
    page = run(query.list_page(limit=1))
    assert [(r.id, r.last_activity_at, r.live, r.persisted) for r in page.records] == [("stale", 9, True, True)]
    rest = run(query.list_page(limit=5, after=page.next))
    assert [(r.id, r.live) for r in rest.records] == [("other", False)]
    assert rest.next is None


def test_agents_and_cwds_fill_the_filters(host, notes, log_builder):
    L = log_builder
    host.store.import_log(SessionHeader(id="a", created_at=1, cwd="/z"), L.events([L.user(0)]))
    host.store.import_log(SessionHeader(id="b", created_at=1, cwd=None), L.events([L.user(0)]))
    host.sessions.create("/y", "live")
    note(notes, "n.md", 5)
    query = host.services.session_query
    assert run(query.list_agents()) == [AgentInfo("dsh", "dsh"), AgentInfo("notes", "notes")]
    assert run(query.list_cwds()) == sorted(["/y", "/z", str(notes)])
    assert run(query.list_cwds(agent="dsh")) == ["/y", "/z"]
    assert run(query.list_cwds(agent="notes")) == [str(notes)]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"after": "nonsense!"}, "invalid page cursor 'nonsense!'"),
        ({"after": encode_cursor((1, "x"))[:-2]}, "invalid page cursor"),
        ({"after": "WyJhIiwiYiJd"}, "invalid page cursor"),  # ["a","b"]: no time
        ({"agent": "nobody"}, "unknown agent 'nobody' \\(known: dsh, notes\\)"),
        ({"limit": 0}, "page limit must be an integer from 1 to 1000, not 0"),
        ({"limit": 1001}, "not 1001"),
        ({"limit": True}, "not True"),
    ],
)
def test_a_page_no_listing_answers_is_refused_in_one_line(host, request_, message):
    query = host.services.session_query
    with pytest.raises(InvalidPageRequest, match=message) as info:
        run(query.list_page(**request_))
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidPageRequest, match=message):
        query.list_page_now(**request_)


@given(at=st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False), session_id=st.text())
def test_a_cursor_reads_back_as_its_key(at, session_id):
    cursor = encode_cursor((at, session_id))
    assert cursor.isascii() and "/" not in cursor and "+" not in cursor
    assert decode_cursor(cursor) == (at, session_id)


# -- a session's surface and log ------------------------------------------------------------------------


def walk_surface(query, session_id: str, limit: int) -> list[tuple]:
    pages = [run(query.read_surface_page(session_id, limit=limit))]
    while pages[-1].before is not None:
        pages.append(run(query.read_surface_page(session_id, before=pages[-1].before, limit=limit)))
    return [
        (e.seq, e.time, e.kind, e.text, e.source_kind, e.source_plugin)
        for page in reversed(pages)
        for e in page.entries
    ]


def walk_events(query, session_id: str, limit: int) -> list:
    pages = [run(query.read_events_page(session_id, limit=limit))]
    while pages[-1].before_seq is not None:
        pages.append(run(query.read_events_page(session_id, before_seq=pages[-1].before_seq, limit=limit)))
    return [event for page in reversed(pages) for event in page.events]


@given(data=st.data(), limit=st.integers(1, 5))
@PROPERTY
def test_live_and_stored_sessions_page_the_same_surface_and_log(host, log_builder, data, limit):
    L = log_builder
    raws = timed_log(L, data.draw)
    run_id = next(_runs)
    live = host.sessions.create("/w", f"live-{run_id}")
    for raw in raws:
        live.append_raw(raw)
    host.store.import_log(L.header(f"stored-{run_id}"), L.events(raws))
    query = host.services.session_query
    for session_id in (f"live-{run_id}", f"stored-{run_id}"):
        assert walk_surface(query, session_id, limit) == readable(run(query.read_surface(session_id)))
        assert walk_events(query, session_id, limit) == run(query.read_events(session_id))


def test_a_page_of_a_live_or_stored_session_carries_its_header_and_latest_title(host, log_builder):
    L = log_builder
    query = host.services.session_query
    live = host.sessions.create("/w", "live")
    live.append_raw(L.user(0, "q"))
    page = run(query.read_surface_page("live"))
    assert (page.header, page.title) == (live.header, None)
    for seq, title in ((1, "first"), (2, "second")):
        live.append_raw(titled(L, seq, title))
        page = run(query.read_surface_page("live"))
        assert (page.header, page.title, page.captured_through_seq) == (live.header, title, seq)
    raws = [L.user(0, "q"), titled(L, 1, "first"), titled(L, 2, "stored \ud800 title")]
    host.store.import_log(L.header("stored", created_at=4, cwd="/s"), L.events(raws))
    page = run(query.read_surface_page("stored"))
    assert (page.header, page.title) == (run(query.read_header("stored")), "stored \ud800 title")
    assert (page.header.created_at, page.header.cwd) == (4, "/s")


def test_a_source_session_pages_its_conversation(host, notes):
    note(notes, "a.md", 7)
    query = host.services.session_query
    page = run(query.read_surface_page("notes:a.md"))
    assert [(e.position, e.seq, e.time, e.kind, e.text) for e in page.entries] == [(0, 0, 7, "user", "Note a.md\nbody")]
    assert (page.before, page.captured_through_seq) == (None, 0)
    # The notes source keeps no title of its own (its listing shows the note's first line).
    assert (page.header, page.title) == (run(query.read_header("notes:a.md")), None)
    assert walk_events(query, "notes:a.md", 1) == run(query.read_events("notes:a.md"))


def test_a_page_of_a_source_that_pages_nothing_carries_the_title_it_keeps(host, notes, monkeypatch):
    note(notes, "a.md", 7)
    source = host.sources.get("notes")
    monkeypatch.setattr(source, "read_title", lambda session_id: StoredTitle(f"title of {session_id}", 0, 7))
    page = run(host.services.session_query.read_surface_page("notes:a.md"))
    assert (page.header.id, page.header.created_at, page.title) == ("notes:a.md", 7, "title of notes:a.md")


def test_pages_of_an_unknown_session_or_a_bad_position(host):
    query = host.services.session_query
    for session_id in ("nope", "notes:nope.md"):
        with pytest.raises(SessionNotFound):
            run(query.read_surface_page(session_id))
        with pytest.raises(SessionNotFound):
            run(query.read_events_page(session_id))
    with pytest.raises(InvalidPageRequest, match="before must be a non-negative integer, not -1"):
        run(query.read_surface_page("nope", before=-1))
    with pytest.raises(InvalidPageRequest, match="before_seq must be a non-negative integer, not 'x'"):
        run(query.read_events_page("nope", before_seq="x"))  # type: ignore[arg-type]
    with pytest.raises(InvalidPageRequest, match="page limit"):
        run(query.read_surface_page("nope", limit=5000))
