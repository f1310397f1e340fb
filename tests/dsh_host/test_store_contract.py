"""The store contract, run against every store (SQLite and PostgreSQL, see tests/store_backends.py).

Round trips, the materialised surface, listing without the log, surface reads by key that
never decode log-only or shadowed rows, batches that write all or nothing, lossless ids and
texts, and the optional session leases (both stores keep them). Store-specific behaviour (files,
roles, schemas) is tested beside each store.
"""

from __future__ import annotations

import itertools
import json
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_host import LeasingStore, SessionBusy, SessionNotFound, StoreError
from dsh_host.session.events import SessionHeader, SurfaceText, event_from_json, surface_text
from dsh_host.session.session import Session
from dsh_host.session.surface import fold

# Its logs are built by hand (turnless fixtures, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs


USER = {"kind": "user"}


PROVENANCE = {"provider": "scripted", "model": "scripted-1"}


_ids = itertools.count()


def fresh_id(prefix: str = "s") -> str:
    return f"{prefix}-{next(_ids)}"


def run_turn(session: Session, turn: int, *, chunks: int = 3, tool: bool = True) -> None:
    """Append a canonical turn (a prompt, one step whose message cites its chunks, a tool pair) to a live session."""
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": f"prompt {turn}"}], "source": USER},
        surface_op="append",
    )
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("request/header", {"header": {"config": PROVENANCE}, "reason": "initial"})
    chunk_seqs = []
    for i in range(chunks):
        chunk = {"type": "text-delta", "index": 0, "text": f"part {i} "}
        chunk_seqs.append(session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk}).seq)
    content = [{"type": "text", "text": "answer"}]
    if tool:
        content.append({"type": "tool-call", "id": f"call-{turn}", "name": "read", "arguments": "{}"})
    session.append(
        "assistant/message",
        {"turn": turn, "step": 1, "content": content, "provenance": PROVENANCE},
        surface_op="append",
        sources=chunk_seqs,
    )
    if tool:
        call = session.append(
            "tool/call",
            {"turn": turn, "step": 1, "callId": f"call-{turn}", "name": "read", "arguments": "{}"},
        )
        session.append(
            "tool/result",
            {
                "turn": turn,
                "step": 1,
                "callId": f"call-{turn}",
                "content": [{"type": "text", "text": "file"}],
                "isError": False,
            },
            surface_op="append",
            sources=[call.seq],
        )
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def log_form(event) -> dict:
    return json.loads(event.to_line())


def surface_seqs(store, session_id: str) -> list[int]:
    return [e["seq"] for e in store.read_surface(session_id).events]


# -- round trip -------------------------------------------------------------------------------------


def test_round_trip(store):
    header = SessionHeader(id="round", created_at=1_700_000_000_123, cwd="/home/me/project", delegation_depth=0)
    session = Session(header)
    run_turn(session, 1)
    store.append(header, session.events)
    run_turn(session, 2, tool=False)
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "summary"}], "source": {"kind": "plugin", "plugin": "compact"}},
        surface_op={"op": "replace", "start": 1, "end": 9},
        sources=[1, 7, 9],
    )
    store.append(header, session.events[store.read_surface("round").captured_through_seq + 1 :])

    read_header, events = store.read_events("round")
    assert read_header == header
    assert [e.to_line() for e in events] == [e.to_line() for e in session.events]
    assert events == list(session.events)
    _, lines = store.read_lines("round")
    assert lines == [e.to_line() for e in session.events]

    surface = store.read_surface("round")
    assert surface.header == header
    assert surface.captured_through_seq == session.seq - 1
    assert [e["seq"] for e in surface.events] == session.surface.nodes == [*fold(events).nodes]
    assert surface.events == [log_form(session.event(s)) for s in session.surface.nodes]
    assert store.read_header("round") == header
    assert store.has("round") and not store.has("other")


def test_a_session_with_no_events_is_not_stored(store):
    store.append(SessionHeader(id="lazy", created_at=0), [])
    assert not store.has("lazy")
    assert store.list_sessions() == []


def test_header_fields_round_trip(store, log_builder):
    store.append(SessionHeader(id="plain", created_at=0), log_builder.events([log_builder.raw("turn/start", 0)]))
    # The header is kept as its JSONL line, which always carries delegationDepth (0 when absent).
    assert store.read_header("plain") == SessionHeader(id="plain", created_at=0, delegation_depth=0)
    header = SessionHeader(
        id="child", created_at=12.5, cwd=None, parent_session="parent", seed_length=3, delegation_depth=2
    )
    store.append(header, log_builder.events([log_builder.raw("turn/start", 0)]))
    assert store.read_header("child") == header
    assert store.read_surface("child").header == header


# -- the materialised surface equals the fold -------------------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_stored_surface_equals_the_fold_after_any_appends_and_replaces(shared_store, log_builder, data):
    raws, expected, _ = log_builder.draw_log(data.draw, max_ops=60)
    events = [event_from_json(raw) for raw in raws]
    header = SessionHeader(id=fresh_id("prop"), created_at=0, cwd="/w")
    written = 0
    while written < len(events):
        size = data.draw(st.integers(min_value=1, max_value=max(1, len(events) - written)), label="batch")
        shared_store.append(header, events[written : written + size])
        written += size
        snapshot = shared_store.read_surface(header.id)
        assert [e["seq"] for e in snapshot.events] == list(fold(events[:written]).nodes)
        assert snapshot.captured_through_seq == written - 1
    if events:
        snapshot = shared_store.read_surface(header.id)
        assert [e["seq"] for e in snapshot.events] == expected
        assert snapshot.events == [log_form(events[s]) for s in expected]
        assert shared_store.read_events(header.id)[1] == events
        # The text kept per surface node is what the surface's events say.
        (texts,) = shared_store.read_surface_texts([header.id])
        assert texts.texts == [surface_text(events[s].type, events[s].data) for s in expected]
        assert all(type(text) is SurfaceText for text in texts.texts)
        assert [text.type for text in texts.texts] == [events[s].type for s in expected]
        assert texts.captured_through_seq == snapshot.captured_through_seq


def test_stored_surface_follows_nested_and_tool_result_replaces(store, log_builder):
    L = log_builder
    raws = [
        L.user(0),
        L.user(1),
        L.raw("tool/result", 2, L.tool_result_data("c", "big"), op="append", sources=[0]),
        L.assistant(3, op=L.replace(0, 0), sources=[0]),
        L.raw("tool/result", 4, L.tool_result_data("c", "small"), op=L.replace(2, 2), sources=[2]),
        L.assistant(5, op=L.replace(3, 1), sources=[3, 1]),
        L.user(6),
    ]
    header = SessionHeader(id="nested", created_at=0)
    for raw in raws:  # one batch per event, so every replace sees the stored surface
        store.append(header, [event_from_json(raw)])
    assert surface_seqs(store, "nested") == [5, 4, 6] == list(fold([event_from_json(r) for r in raws]).nodes)


# -- listing ----------------------------------------------------------------------------------------


def _title(L, seq, title, time=0):
    return L.raw("session/title", seq, {"title": title, "messageSeqs": [], "source": {"kind": "fallback"}}, time=time)


def test_list_sessions_newest_first_ties_by_id_with_latest_titles(store, log_builder):
    L = log_builder
    for sid, created in [("old", 1), ("b", 7), ("B", 7), ("a", 7), ("é", 7), ("new", 9), ("mid", 5.5)]:
        store.append(SessionHeader(id=sid, created_at=created, cwd=f"/w/{sid}"), L.events([L.raw("turn/start", 0)]))
    store.append(SessionHeader(id="b", created_at=7), [event_from_json(_title(L, 1, "first title", 10))])
    store.append(
        SessionHeader(id="b", created_at=7),
        L.events([L.chunk(2), _title(L, 3, "second title", 20), L.chunk(4)]),
    )
    store.append(SessionHeader(id="new", created_at=9), L.events([_title(L, 1, "a"), _title(L, 2, "b")]))

    rows = store.list_sessions()
    assert [r.id for r in rows] == ["new", "B", "a", "b", "é", "mid", "old"]  # code-point order on ties
    titles = {r.id: r.title for r in rows}
    assert titles == {
        "new": "b",
        "B": None,
        "a": None,
        "b": "second title",
        "é": None,
        "mid": None,
        "old": None,
    }
    assert rows[1].cwd == "/w/B" and rows[1].created_at == 7
    title = store.read_title("b")
    assert (title.title, title.event_seq, title.updated_at) == ("second title", 3, 20)
    assert store.read_title("old") is None


def test_listing_reads_no_log(store_backend, store, log_builder):
    L = log_builder
    store.append(SessionHeader(id="s", created_at=0), L.events([L.raw("turn/start", 0), _title(L, 1, "kept")]))
    with store_backend.trace(store) as traced:
        rows = store.list_sessions()
        title = store.read_title("s")
    assert rows[0].title == title.title == "kept"
    statements = [sql for sql, _ in traced]
    assert statements and not any("events" in s or "surface" in s for s in statements)


# -- last activity and the listing a page at a time -------------------------------------------------


def _at(L, type, seq, time, **kwargs):
    return L.raw(type, seq, time=time, **kwargs)


def test_last_activity_is_the_time_of_the_last_stored_event(store, log_builder):
    L = log_builder
    header = SessionHeader(id="s", created_at=5, cwd="/w")
    store.append(header, L.events([_at(L, "turn/start", 0, 10), _at(L, "assistant/chunk", 1, 12)]))
    assert store.list_sessions()[0].last_activity_at == 12
    # A later batch, with a title (a different write) and an event older than the one before it.
    store.append(header, L.events([_title(L, 2, "walrus talk", time=30), _at(L, "assistant/chunk", 3, 20)]))
    store.import_log(SessionHeader(id="imported", created_at=6), L.events([_at(L, "turn/start", 0, 40)]))
    store.import_log(SessionHeader(id="empty", created_at=7), [])

    expected = {"s": 20, "imported": 40, "empty": 7}  # no event yet: its creation time
    assert {row.id: row.last_activity_at for row in store.list_sessions()} == expected
    assert {row.id: row.last_activity_at for row in store.list_sessions_page(10)} == expected
    found = store.search_candidates("", target_id=None, target_cwd=None, limit=10)
    assert {row.id: row.last_activity_at for row in found} == expected
    (named,) = store.search_candidates("walrus", target_id=None, target_cwd=None, limit=10)
    assert (named.id, named.last_activity_at) == ("s", 20)


def walk_listing(store, limit: int) -> list:
    """The whole listing read a page of `limit` at a time, each page after the last row of the one before."""
    rows: list = []
    while True:
        page = store.list_sessions_page(limit, (rows[-1].created_at, rows[-1].id) if rows else None)
        assert len(page) <= limit
        rows.extend(page)
        if len(page) < limit:
            return rows


LISTED = [("old", 1), ("b", 7), ("B", 7), ("a", 7), ("é", 7), ("\ud800", 7), ("", 7), ("new", 9), ("mid", 5.5)]


def test_pages_walk_the_listing_and_start_after_any_key(store, log_builder):
    L = log_builder
    for sid, created in LISTED:
        store.append(SessionHeader(id=sid, created_at=created, cwd=f"/w/{sid}"), L.events([_title(L, 0, sid)]))
    listing = store.list_sessions()
    assert [row.id for row in listing] == ["new", "", "B", "a", "b", "é", "\ud800", "mid", "old"]
    for limit in (1, 2, 3, len(LISTED), 100):
        assert walk_listing(store, limit) == listing
    assert store.list_sessions_page(2) == listing[:2]
    assert store.list_sessions_page(2, (7, "B")) == listing[3:5]  # a key of a stored session
    assert store.list_sessions_page(3, (7, "Z")) == listing[3:6]  # or of none: where it would sit
    assert store.list_sessions_page(9, (8, "")) == listing[1:]
    assert store.list_sessions_page(9, (1, "old")) == store.list_sessions_page(9, (0, "")) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sessions=st.lists(st.tuples(st.text(max_size=6), st.sampled_from([0, 1, 2.5, 2**53 - 1])), max_size=8),
    limit=st.integers(1, 7),
)
def test_pages_of_any_size_walk_any_listing(shared_store, log_builder, sessions, limit):
    L = log_builder
    for sid, created in sessions:
        header = SessionHeader(id=f"{fresh_id('p')}:{sid}", created_at=created)
        shared_store.append(header, L.events([L.raw("turn/start", 0)]))
    assert walk_listing(shared_store, limit) == shared_store.list_sessions()


def test_a_page_reads_its_rows_in_the_order_of_the_newest_first_index(store_backend, store, log_builder):
    L = log_builder
    for i in range(40):
        store.append(SessionHeader(id=f"s{i:02}", created_at=i // 2), L.events([L.raw("turn/start", 0)]))
    store_backend.pad(10)  # tables of a real size, so the plan is the one a team's server runs
    with store_backend.trace(store) as traced:
        first = store.list_sessions_page(5)
        later = store.list_sessions_page(5, (first[-1].created_at, first[-1].id))
    assert [row.id for row in first + later] == [f"s{i:02}" for i in (38, 39, 36, 37, 34, 35, 32, 33, 30, 31)]
    # No sort and no scan of the table: each page is the next stretch of the index, so it costs
    # what it holds wherever in the listing it starts.
    assert store_backend.index_ordered(store, traced, "sessions_newest_first")


# -- reading a surface reads no log-only or shadowed rows -------------------------------------------


def _session_with_chunks_and_a_compaction(store, L, session_id="big"):
    raws = [L.raw("turn/start", 0)]
    for _ in range(10):
        raws.append(L.user(len(raws)))
        for _ in range(5):
            raws.append(L.chunk(len(raws)))
        raws.append(L.assistant(len(raws), sources=[len(raws) - 1]))
    nodes = list(fold([event_from_json(r) for r in raws]).nodes)
    half = nodes[: len(nodes) // 2]
    raws.append(L.user(len(raws), "checkpoint", op=L.replace(half[0], half[-1]), sources=half))
    raws.append(L.raw("turn/end", len(raws)))
    events = [event_from_json(r) for r in raws]
    store.append(SessionHeader(id=session_id, created_at=0), events)
    return events, half


def test_read_surface_only_looks_rows_up_by_key(store_backend, store, log_builder):
    events, _ = _session_with_chunks_and_a_compaction(store, log_builder)
    store_backend.pad(20_000)  # tables of a real size, so the plan is the one a team's server runs
    with store_backend.trace(store) as traced:
        surface = store.read_surface("big")
    assert [e["seq"] for e in surface.events] == list(fold(events).nodes)
    accesses = store_backend.table_accesses(store, traced)
    # Every table access is a keyed search: sessions by id, surface by session, events by key.
    assert accesses and all(store_backend.keyed(a) for a in accesses), accesses
    if store_backend.name == "sqlite":
        assert "SEARCH e USING INTEGER PRIMARY KEY (rowid=?)" in accesses, accesses
    else:
        assert any(a.endswith(" events") for a in accesses), accesses


def test_read_surface_survives_corrupt_log_only_and_shadowed_rows(store_backend, store, log_builder):
    events, shadowed = _session_with_chunks_and_a_compaction(store, log_builder)
    before = store.read_surface("big")
    # Overwrite every row that is not on the surface with bytes that are not JSON at all.
    current = set(fold(events).nodes)
    off_surface = [e.seq for e in events if e.seq not in current]
    assert len(off_surface) > len(current)
    store_backend.corrupt_lines(store, "big", off_surface)
    assert store.read_surface("big") == before
    assert set(shadowed) <= {e.seq for e in events} - current
    with pytest.raises(json.JSONDecodeError):
        store.read_events("big")


# -- errors -----------------------------------------------------------------------------------------


def test_unknown_session_is_not_found(store):
    for read in (
        store.read_surface,
        store.read_lines,
        store.read_events,
        store.read_header,
        store.read_title,
    ):
        with pytest.raises(SessionNotFound) as info:
            read("ghost")
        assert str(info.value) == 'session "ghost" not found'
        assert info.value.session_id == "ghost"


@pytest.mark.parametrize(
    ("seqs", "message"),
    [([0, 1, 1], "not contiguous"), ([0, 2], "not contiguous"), ([1, 2], "first batch must start at seq 0")],
)
def test_a_bad_first_batch_writes_nothing(store, log_builder, seqs, message):
    events = [event_from_json(log_builder.raw("custom/x", s)) for s in seqs]
    with pytest.raises(StoreError, match=message):
        store.append(SessionHeader(id="s", created_at=0), events)
    assert store.list_sessions() == []
    assert not store.has("s")


@pytest.mark.parametrize(
    ("seqs", "message"),
    [
        ([3, 3], "not contiguous"),
        ([3, 4, 6], "not contiguous"),
        ([2, 3], "batch starts at seq 2, store expects 3"),
    ],
)
def test_a_bad_later_batch_writes_nothing(store, log_builder, seqs, message):
    L = log_builder
    header = SessionHeader(id="s", created_at=0)
    store.append(header, L.events([L.user(0), L.raw("custom/x", 1), L.user(2, title := "t")]))
    assert title
    before = (store.read_lines("s"), store.read_surface("s"), store.list_sessions())
    events = [event_from_json(L.user(s)) for s in seqs]
    with pytest.raises(StoreError, match=message):
        store.append(header, events)
    assert (store.read_lines("s"), store.read_surface("s"), store.list_sessions()) == before


def test_a_batch_failing_midway_is_rolled_back(store, log_builder):
    L = log_builder
    header = SessionHeader(id="s", created_at=0)
    store.append(header, L.events([L.user(0)]))
    # The replace names a seq that is not on the stored surface: the store refuses the batch.
    batch = L.events([L.user(1), _title(L, 2, "never"), L.assistant(3, op=L.replace(9, 9), sources=[0])])
    with pytest.raises(StoreError, match="disagrees with replace at seq 3"):
        store.append(header, batch)
    assert store.read_lines("s")[1] == [event_from_json(L.user(0)).to_line()]
    assert store.read_title("s") is None
    store.append(header, L.events([L.user(1)]))  # the next batch continues at seq 1
    assert surface_seqs(store, "s") == [0, 1]


def test_two_handles_cannot_interleave_one_session(store_backend, log_builder):
    L = log_builder
    first, second = store_backend.open(), store_backend.open()
    try:
        header = SessionHeader(id="s", created_at=0)
        first.append(header, L.events([L.user(0)]))
        second.append(header, L.events([L.user(1)]))
        with pytest.raises(StoreError, match="store expects 2"):
            first.append(header, L.events([L.user(1)]))
        assert surface_seqs(first, "s") == [0, 1]
    finally:
        first.close()
        second.close()


def test_import_and_delete(store, log_builder):
    L = log_builder
    header = SessionHeader(id="s", created_at=0)
    store.import_log(header, L.events([L.user(0), L.user(1)]))
    with pytest.raises(StoreError, match="already exists"):
        store.import_log(header, L.events([L.user(0)]))
    assert surface_seqs(store, "s") == [0, 1]
    store.import_log(SessionHeader(id="s", created_at=5), L.events([L.chunk(0)]), replace=True)
    assert surface_seqs(store, "s") == []
    assert len(store.read_lines("s")[1]) == 1
    assert store.read_header("s").created_at == 5
    store.import_log(SessionHeader(id="empty", created_at=0), [])
    assert store.read_surface("empty").captured_through_seq is None
    assert store.delete("s") is True
    assert store.delete("s") is False
    assert not store.has("s")
    assert [r.id for r in store.list_sessions()] == ["empty"]


def test_a_closed_store_refuses_work(store_backend):
    store = store_backend.open()
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.list_sessions()


# -- session ids are arbitrary strings --------------------------------------------------------------


AWKWARD_IDS = [
    'quote"d',
    "it's",
    "a/b",
    "/etc/passwd",
    "..",
    ".",
    "../../escape",
    "back\\slash",
    "new\nline",
    "tab\tcr\r",
    "\x00nul",
    "\x1b[31mred\x1b[0m",
    "\x7f\x9b",
    "\ud800",
    "lone \udfff low",
    "\ud83d\ude00 paired halves",
    "😀 emoji",
    "",
    " ",
    "x" * 10_000,
    "%s %d {0}",
    "Robert'); DROP TABLE sessions;--",
]


def _store_and_read_back(store, log_builder, session_id):
    """Ids are exact; text inside JSON follows JSON, where two surrogate halves are one character."""
    L = log_builder
    as_json_text = json.loads(json.dumps(session_id))
    header = SessionHeader(id=session_id, created_at=3, cwd="/w")
    store.append(header, L.events([L.user(0, session_id), _title(L, 1, session_id)]))
    assert store.has(session_id)
    assert store.read_header(session_id).id == session_id
    assert store.read_surface(session_id).header.id == session_id
    assert store.read_surface(session_id).events[0]["data"]["content"][0]["text"] == as_json_text
    assert store.read_title(session_id).title == session_id
    assert [e.data["title"] for e in store.read_events(session_id)[1][1:]] == [as_json_text]
    assert session_id in {r.id for r in store.list_sessions()}


def test_awkward_session_ids_round_trip(store, log_builder):
    store_awkward_ids(store, log_builder)


def store_awkward_ids(store, log_builder) -> None:
    """Every awkward id round trips, lists in code-point order, and a near miss is not found."""
    for session_id in AWKWARD_IDS:
        _store_and_read_back(store, log_builder, session_id)
    rows = store.list_sessions()
    assert sorted(r.id for r in rows) == sorted(AWKWARD_IDS)
    assert [r.id for r in rows] == sorted(AWKWARD_IDS)  # equal created_at: code-point order
    with pytest.raises(SessionNotFound):
        store.read_surface("\ud801")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session_id=st.text(alphabet=st.characters(codec=None, categories=None), max_size=40))
def test_any_string_is_a_session_id(shared_store, log_builder, session_id):
    session_id = f"{fresh_id('h')}:{session_id}"
    _store_and_read_back(shared_store, log_builder, session_id)


def test_event_text_with_lone_surrogates_round_trips(store, log_builder):
    L = log_builder
    header = SessionHeader(id="s", created_at=0, cwd="/tmp/\udcff-undecodable", delegation_depth=0)
    events = L.events([L.user(0, "lone \ud800 high"), L.raw("custom/x", 1, {"k\udc00": ["\udfff"]})])
    store.append(header, events)
    assert store.read_events("s") == (header, events)
    assert store.read_surface("s").events[0]["data"]["content"][0]["text"] == "lone \ud800 high"
    assert store.list_sessions()[0].cwd == "/tmp/\udcff-undecodable"


def test_surface_texts_titles_and_cwds_keep_any_string(store, log_builder):
    L = log_builder
    awkward = ["nul \x00 inside", "lone \ud800 high", "line\u2028separator", "\udfff", "😀", "", "\x00"]
    raws = [
        L.raw("user/message", i, {"content": [L.text(text)], "source": {"kind": "plugin", "plugin": text}}, op="append")
        for i, text in enumerate(awkward)
    ]
    raws.append(L.raw("context/message", len(raws), {"content": [], "source": {"kind": "\x00"}}, op="append"))
    raws.append(_title(L, len(raws), "title \x00 \ud800"))
    events = L.events(raws)
    header = SessionHeader(id="texts", created_at=0, cwd="/w/\x00/\u2028/\udcff", delegation_depth=0)
    store.append(header, events)
    (texts,) = store.read_surface_texts(["texts"])
    assert texts.texts == [surface_text(e.type, e.data) for e in events[:-1]]
    assert [t.source_plugin for t in texts.texts[: len(awkward)]] == awkward
    assert store.read_title("texts").title == "title \x00 \ud800"
    assert store.list_sessions()[0] == ("texts", 0, "/w/\x00/\u2028/\udcff", "title \x00 \ud800", 0)
    assert store.read_events("texts") == (header, events)


def test_event_types_keep_any_string(store, log_builder):
    L = log_builder
    kinds = ["custom/\ud800", "custom/\x00nul", "custom/\u2028", "😀/x"]
    events = L.events([L.raw(kind, seq) for seq, kind in enumerate(kinds)])
    store.append(SessionHeader(id="typed", created_at=0), events)
    store.import_log(SessionHeader(id="imported", created_at=0), events)
    for session_id in ("typed", "imported"):
        assert [e.type for e in store.read_events(session_id)[1]] == kinds


@pytest.mark.parametrize("size", [1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 337, 600])
def test_batches_of_any_size_round_trip(store, size):
    """A live session's batch of any size, awkward types and text among plain chunks, a title on the first."""
    header = SessionHeader(id=f"batch-{size}", created_at=0, cwd="/w")
    session = Session(header)
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})
    session.append("user/message", {"content": [{"type": "text", "text": "go"}], "source": USER}, surface_op="append")
    session.append("session/title", {"title": f"title {size}", "messageSeqs": [1], "source": {"kind": "fallback"}})
    awkward = {7: ("custom/\ud800", {"t": "x"}), 9: ("assistant/chunk", {"t": "lone \udfff"}), 11: ("😀/x", {"t": "é"})}
    for i in range(size):
        kind, data = awkward.get(i, ("assistant/chunk", {"turn": 1, "chunk": {"type": "text-delta", "text": f" w{i}"}}))
        session.append(kind, data)
    first = list(session.events)
    store.append(header, first)
    for i in range(size):  # a later batch of the same size continues the session
        session.append("assistant/chunk", {"turn": 1, "chunk": {"type": "text-delta", "text": f" v{i}"}})
    store.append(header, session.events[len(first) :])

    _, lines = store.read_lines(header.id)
    assert list(map(json.loads, lines)) == [log_form(e) for e in session.events]  # lone surrogates stored escaped
    assert store.read_events(header.id)[1] == list(session.events)
    assert store.read_title(header.id).title == f"title {size}"
    assert store.list_sessions()[0].title == f"title {size}"


# -- leases: one driver per session -------------------------------------------------------------------


@pytest.fixture
def two_handles(store_backend):
    """Two handles on one store, as two processes would have them."""
    first, second = store_backend.open(), store_backend.open()
    yield first, second
    first.close()
    second.close()


def test_both_stores_keep_leases(store):
    assert isinstance(store, LeasingStore)


def test_a_held_lease_refuses_every_other_taker_at_once(two_handles):
    first, second = two_handles
    lease = first.lease("s")  # a session need not be stored to be leased
    assert lease.session_id == "s"
    for taker in (second, first):  # another handle, and the same one again
        with pytest.raises(SessionBusy) as refused:
            taker.lease("s")
        assert str(refused.value) == 'session "s" is being driven by another dsh'
        assert refused.value.session_id == "s"
    other = second.lease("other")  # other sessions are free
    other.release()
    lease.release()
    second.lease("s").release()


def test_a_lease_writes_like_append_until_it_is_released(two_handles, log_builder):
    L = log_builder
    first, second = two_handles
    header = SessionHeader(id="s", created_at=0)
    lease = first.lease("s")
    lease.append(header, L.events([L.user(0)]))
    lease.append(header, L.events([L.user(1)]))
    assert surface_seqs(second, "s") == [0, 1]
    with pytest.raises(StoreError, match="store expects 2"):
        lease.append(header, L.events([L.user(0)]))
    lease.release()
    lease.release()  # twice does nothing
    with pytest.raises(StoreError, match="was released"):
        lease.append(header, L.events([L.user(2)]))
    assert surface_seqs(second, "s") == [0, 1]


def test_readers_never_take_a_lease_nor_wait_for_one(two_handles, log_builder):
    L = log_builder
    first, second = two_handles
    header = SessionHeader(id="s", created_at=0, cwd="/w")
    lease = first.lease("s")
    lease.append(header, L.events([L.user(0, "a driven session"), _title(L, 1, "driven")]))
    assert [r.id for r in second.list_sessions()] == ["s"]
    assert second.has("s") and second.read_header("s").cwd == "/w"
    assert second.read_title("s").title == "driven"
    assert len(second.read_events("s")[1]) == len(second.read_lines("s")[1]) == 2
    assert second.read_surface("s").captured_through_seq == 1
    assert [t.header.id for t in second.read_surface_texts(["s"])] == ["s"]
    assert [c.id for c in second.search_candidates("driven", target_id=None, target_cwd=None, limit=5)] == ["s"]
    lease.release()


def test_deleting_or_replacing_a_driven_session_is_refused(two_handles, log_builder):
    L = log_builder
    first, second = two_handles
    header = SessionHeader(id="s", created_at=0)
    lease = first.lease("s")
    lease.append(header, L.events([L.user(0)]))
    with pytest.raises(SessionBusy, match='session "s" is being driven by another dsh'):
        second.delete("s")
    with pytest.raises(SessionBusy, match='session "s" is being driven by another dsh'):
        second.import_log(header, L.events([L.chunk(0)]), replace=True)
    assert surface_seqs(second, "s") == [0]
    lease.release()
    second.import_log(header, L.events([L.chunk(0)]), replace=True)
    assert second.delete("s") is True


def test_a_waiter_gets_the_lease_once_its_holder_lets_go(two_handles):
    first, second = two_handles
    lease = first.lease("s")
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(second.lease("s", wait=60)))
    waiter.start()
    lease.release()
    waiter.join(60)
    assert [held.session_id for held in taken] == ["s"]
    taken[0].release()


def test_waiting_in_vain_says_how_long_it_waited(two_handles):
    first, second = two_handles
    lease = first.lease("s")
    with pytest.raises(SessionBusy) as refused:
        second.lease("s", wait=0.05)
    assert str(refused.value) == 'session "s" is still being driven by another dsh after 0.05 s'
    lease.release()


def test_closing_a_store_releases_its_leases(two_handles):
    first, second = two_handles
    first.lease("s")
    first.close()
    second.lease("s").release()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session_id=st.text(max_size=60))
def test_any_string_can_be_leased(shared_store, session_id):
    lease = shared_store.lease(session_id)
    with pytest.raises(SessionBusy):
        shared_store.lease(session_id)
    lease.release()
    shared_store.lease(session_id).release()
