"""The session query service: live sessions from memory, others from the store."""

from __future__ import annotations

import json

import pytest

from dsh_host.query import SessionRecord, record_json
from dsh_host.session.events import SessionHeader, event_from_json
from dsh_host.store.base import SessionNotFound

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs

USER = {"kind": "user"}


def nested_replace_log(L) -> list[dict]:
    """A log whose second replace folds a checkpoint and the tail after it: the surface ends as
    [4, 5], captured through 5."""
    return [
        L.user(0, "old"),
        L.chunk(1),
        L.user(2, "checkpoint", op=L.replace(0, 0), sources=[0]),
        L.user(3, "retained tail"),
        L.user(4, "checkpoint", op=L.replace(2, 3), sources=[2, 3]),
        L.assistant(5, "answer"),
    ]


def live_session(host, L, session_id, raws, *, created_at=None):
    session = host.sessions.create("/w", session_id, created_at=created_at)
    for raw in raws:
        session.append_raw(raw)
    return session


# -- read_surface -------------------------------------------------------------------------------


async def test_read_surface_after_nested_replaces_live_and_persisted(host, log_builder):
    query = host.services.session_query
    raws = nested_replace_log(log_builder)
    live_session(host, log_builder, "live", raws)
    host.store.append(SessionHeader(id="stored", created_at=0, cwd="/w"), log_builder.events(raws))

    for session_id in ("live", "stored"):
        snapshot = await query.read_surface(session_id)
        assert [(e["seq"], e["type"]) for e in snapshot.events] == [
            (4, "user/message"),
            (5, "assistant/message"),
        ]
        assert snapshot.captured_through_seq == 5
        assert snapshot.header.id == session_id
        assert snapshot.header.cwd == "/w"
        assert snapshot.events[0] == raws[4] | {"time": snapshot.events[0]["time"]}
        assert snapshot.events[0]["sourceEventSeqs"] == [2, 3]
        assert snapshot.events[0]["surfaceOp"] == {"op": "replace", "start": 2, "end": 3}


async def test_read_surface_of_an_empty_session(host):
    query = host.services.session_query
    host.sessions.create("/w", "empty-live")
    host.store.import_log(SessionHeader(id="empty-stored", created_at=0), [])
    for session_id in ("empty-live", "empty-stored"):
        snapshot = await query.read_surface(session_id)
        assert (snapshot.captured_through_seq, snapshot.events) == (None, [])
        assert snapshot.header.id == session_id


async def test_captured_through_seq_counts_log_only_events(host, log_builder):
    L = log_builder
    raws = [L.raw("turn/start", 0), L.user(1), L.chunk(2), L.chunk(3), L.raw("turn/end", 4)]
    host.store.append(SessionHeader(id="s", created_at=0), L.events(raws))
    snapshot = await host.services.session_query.read_surface("s")
    assert snapshot.captured_through_seq == 4
    assert [e["seq"] for e in snapshot.events] == [1]


async def test_a_live_session_is_answered_from_memory(host, log_builder):
    L = log_builder
    query = host.services.session_query
    start = L.raw("turn/start", 0, {"turn": 1, "trigger": {"kind": "message", "source": L.USER}})
    session = live_session(host, L, "s", [start, L.user(1, "flushed")])
    await host.sessions.flush(session)  # also writes the session's title, at seq 2
    session.append_raw(L.user(3, "only in memory"))

    snapshot = await query.read_surface("s")
    assert [e["seq"] for e in snapshot.events] == [1, 3]
    assert snapshot.captured_through_seq == 3
    assert [e["seq"] for e in await query.read_events("s")] == [0, 1, 2, 3]
    assert [e["seq"] for e in host.store.read_surface("s").events] == [1]  # the store is behind

    # The store is never touched for a live session.
    def unreachable(*_):
        raise AssertionError("the store was read for a live session")

    for name in ("read_surface", "read_lines", "read_title", "read_header"):
        setattr(host.store, name, unreachable)
    await query.read_surface("s")
    await query.read_events("s")
    await query.read_title("s")
    assert (await query.read_header("s")).id == "s"


async def test_results_are_detached_from_the_source(host, log_builder):
    L = log_builder
    query = host.services.session_query
    raws = nested_replace_log(L)
    session = live_session(host, L, "live", raws)
    host.store.append(SessionHeader(id="stored", created_at=0), L.events(raws))
    for session_id in ("live", "stored"):
        first = await query.read_surface(session_id)
        first.events[0]["data"]["content"][0]["text"] = "mutated"
        first.events[0]["sourceEventSeqs"].append(99)
        first.events.clear()
        again = await query.read_surface(session_id)
        assert again.events[0]["data"]["content"][0]["text"] == "checkpoint"
        assert again.events[0]["sourceEventSeqs"] == [2, 3]
        events = await query.read_events(session_id)
        events[0]["data"]["content"] = []
        events.pop()
        assert len(await query.read_events(session_id)) == 6
        assert (await query.read_events(session_id))[0]["data"]["content"] == [L.text("old")]
    assert session.event(4).data["content"] == [L.text("checkpoint")]


async def test_read_events_returns_the_whole_log(host, log_builder):
    L = log_builder
    raws = nested_replace_log(L)
    host.store.append(SessionHeader(id="s", created_at=0), L.events(raws))
    assert await host.services.session_query.read_events("s") == [json.loads(e.to_line()) for e in L.events(raws)]


async def test_read_lines_gives_the_header_and_log_lines_live_and_persisted(host, log_builder):
    L = log_builder
    raws = nested_replace_log(L)
    live_session(host, L, "live", raws, created_at=7)
    host.store.append(SessionHeader(id="stored", created_at=7), L.events(raws))
    for session_id in ("live", "stored"):
        header, lines = await host.services.session_query.read_lines(session_id)
        assert (header.id, header.created_at) == (session_id, 7)
        assert [json.loads(line) for line in lines] == [json.loads(e.to_line()) for e in L.events(raws)]


@pytest.mark.parametrize("method", ["read_surface", "read_events", "read_lines", "read_title", "read_header"])
async def test_unknown_session_is_not_found(host, method):
    with pytest.raises(SessionNotFound) as info:
        await getattr(host.services.session_query, method)('no "such" id')
    assert str(info.value) == 'session "no \\"such\\" id" not found'
    with pytest.raises(SessionNotFound, match=r'^session "x" not found$'):
        await getattr(host.services.session_query, method)("x")


# -- titles ---------------------------------------------------------------------------------------


def _title(L, seq, title):
    return L.raw("session/title", seq, {"title": title, "messageSeqs": [], "source": {"kind": "fallback"}}, time=seq)


async def test_read_title_live_and_persisted_latest_wins(host, log_builder):
    L = log_builder
    query = host.services.session_query
    raws = [L.raw("turn/start", 0), _title(L, 1, "one"), _title(L, 2, "two"), L.chunk(3)]
    live_session(host, L, "live", raws)
    host.store.append(SessionHeader(id="stored", created_at=0), L.events(raws))
    for session_id in ("live", "stored"):
        title = await query.read_title(session_id)
        assert (title.title, title.event_seq, title.updated_at) == ("two", 2, 2)
    host.sessions.create("/w", "untitled")
    assert await query.read_title("untitled") is None


# -- list_sessions --------------------------------------------------------------------------------


async def test_list_sessions_overlays_live_sessions_newest_first(host, log_builder):
    L = log_builder
    query = host.services.session_query
    for sid, created in (("old", 1), ("both", 3), ("tie-b", 2), ("tie-a", 2)):
        host.store.append(SessionHeader(id=sid, created_at=created, cwd=f"/{sid}"), L.events([_title(L, 0, sid)]))
    live_only = host.sessions.create("/live", "live-only", created_at=2)
    live_only.append_raw(_title(L, 0, "in memory"))
    both = await host.sessions.resume("both")
    both.append_raw(_title(L, 1, "newer, unflushed"))

    records = await query.list_sessions()
    assert [(r.id, r.live, r.persisted, r.title) for r in records] == [
        ("both", True, True, "newer, unflushed"),
        ("live-only", True, False, "in memory"),
        ("tie-a", False, True, "tie-a"),
        ("tie-b", False, True, "tie-b"),
        ("old", False, True, "old"),
    ]
    # Last active at its last event's time (here a title's time is its seq).
    assert records[1] == SessionRecord("live-only", 2, "/live", "in memory", 0, live=True, persisted=False)
    assert record_json(records[0]) == {
        "id": "both",
        "createdAt": 3,
        "cwd": "/both",
        "title": "newer, unflushed",
        "lastActivityAt": 1,
        "live": True,
        "persisted": True,
    }
    await host.sessions.flush(live_only)
    assert [(r.id, r.live, r.persisted) for r in await query.list_sessions()][1] == ("live-only", True, True)
    host.sessions.forget("live-only")
    assert [(r.id, r.live, r.persisted) for r in await query.list_sessions()][1] == ("live-only", False, True)


async def test_pages_of_the_listing_merge_live_sessions_as_the_whole_listing_does(host, log_builder):
    L = log_builder
    query = host.services.session_query
    for sid, created in (("old", 1), ("both", 3), ("tie-b", 2), ("tie-a", 2), ("new", 5)):
        host.store.append(SessionHeader(id=sid, created_at=created, cwd=f"/{sid}"), L.events([_title(L, 0, sid)]))
    for sid, created in (("live-a", 2), ("live-z", 2), ("live-new", 6), ("live-old", 0)):
        host.sessions.create("/live", sid, created_at=created).append_raw(_title(L, 0, f"title of {sid}"))
    (await host.sessions.resume("both")).append_raw(_title(L, 1, "newer, unflushed"))

    whole = await query.list_sessions()
    assert [r.id for r in whole] == ["live-new", "new", "both", "live-a", "live-z", "tie-a", "tie-b", "old", "live-old"]
    for limit in range(1, len(whole) + 2):
        pages: list[SessionRecord] = []
        while True:
            page = await query.list_sessions_page(limit, (pages[-1].created_at, pages[-1].id) if pages else None)
            assert len(page) <= limit
            pages.extend(page)
            if len(page) < limit:
                break
        assert pages == whole


async def test_list_sessions_of_an_empty_store(host):
    assert await host.services.session_query.list_sessions() == []


async def test_the_query_service_reads_a_store_written_by_another_host(make_host, log_builder):
    with make_host() as writer:
        session = writer.sessions.create("/w", "s")
        for raw in nested_replace_log(log_builder):
            session.append_raw(raw)
        await writer.sessions.close()
        written = list(session.events)  # closing flushed the log (and titled the session)
    with make_host() as reader:
        query = reader.services.session_query
        assert [(r.id, r.live, r.persisted) for r in await query.list_sessions()] == [("s", False, True)]
        snapshot = await query.read_surface("s")
        assert [e["seq"] for e in snapshot.events] == [4, 5]
        assert [event_from_json(e) for e in await query.read_events("s")] == written
