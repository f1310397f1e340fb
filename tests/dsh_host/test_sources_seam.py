"""The session-source seam: sources registered by a hook, routed by id prefix, never written.

The source here is the documented minimal one (`examples/notes_source.py`): a folder of notes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from dsh_host import ConfigError, SessionNotFound, hookimpl
from dsh_host.sources import SourceReadOnly
from dsh_host.sources.ranking import by_position, merge_candidates
from dsh_host.sources.registry import source_factories
from dsh_host.store.base import CandidateRow
from examples.notes_source import NotesPlugin

pytestmark = pytest.mark.foreign_logs  # stores hand-built logs beside the notes


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("Parser plans\nwe will parse rollouts line by line", encoding="utf-8")
    (folder / "b.md").write_text("Groceries\nmilk and bread", encoding="utf-8")
    return folder


@pytest.fixture
def host(make_host, notes):
    return make_host(objects={"notes": NotesPlugin()}, config={"sources": {"notes": {"dir": str(notes)}}})


def run(coro):
    return asyncio.run(coro)


def test_a_source_lists_beside_the_store_under_prefixed_ids(host, log_builder):
    L = log_builder
    host.store.import_log(L.header("dsh-1", created_at=5, cwd="/w"), L.events([L.user(0, "stored question")]))
    records = run(host.services.session_query.list_sessions())
    assert {(r.id, r.source) for r in records} == {("dsh-1", None), ("notes:a.md", "notes"), ("notes:b.md", "notes")}
    assert [r.title for r in records if r.id == "notes:a.md"] == ["Parser plans"]


def test_reads_of_a_source_session_come_from_the_source(host):
    query = host.services.session_query
    snapshot = run(query.read_surface("notes:a.md"))
    assert snapshot.header.id == "notes:a.md"
    assert snapshot.captured_through_seq == 0
    assert snapshot.events[0]["type"] == "user/message"
    assert snapshot.events[0]["surfaceOp"] == "append"
    (texts,) = run(query.read_surface_texts(["notes:a.md"]))
    assert [t.text for t in texts.texts] == ["Parser plans\nwe will parse rollouts line by line"]
    events = run(query.read_events("notes:b.md"))
    assert [e["seq"] for e in events] == [0]
    with pytest.raises(SessionNotFound):
        run(query.read_surface("notes:missing.md"))


def test_an_id_without_a_mounted_prefix_goes_to_the_store(host, log_builder):
    L = log_builder
    host.store.import_log(L.header("other:1"), L.events([L.user(0, "mine")]))
    texts = run(host.services.session_query.read_surface_texts(["other:1", "notes:b.md"]))
    assert [t.header.id for t in texts] == ["other:1", "notes:b.md"]


def test_a_source_session_is_never_resumed_written_or_compacted(host):
    with pytest.raises(SourceReadOnly, match=r"belongs to the read-only source 'notes'"):
        run(host.open_agent("notes:a.md"))
    with pytest.raises(SourceReadOnly):
        host.sessions.create("/w", "notes:new.md")
    with pytest.raises(SourceReadOnly):
        run(host.sessions.resume("notes:b.md"))
    assert "\n" not in str(SourceReadOnly("notes:a.md", "notes"))


def test_candidates_interleave_store_and_source_by_cwd_then_name_then_body(host, notes, log_builder):
    L = log_builder
    store = host.store
    store.import_log(L.header("same-cwd", created_at=1, cwd=str(notes)), L.events([L.user(0, "we parse things")]))
    store.import_log(L.header("elsewhere", created_at=2, cwd="/else"), L.events([L.user(0, "parse parse parse")]))
    rows = run(host.services.session_query.search_candidates("parse", target_id=None, target_cwd=str(notes), limit=10))
    assert [(row.id, row.snippet is not None) for row in rows] == [
        ("notes:a.md", False),  # the note's cwd is the target's, and its title matches by name ("Parser plans")
        ("same-cwd", True),
        ("elsewhere", True),
    ]


def test_a_source_body_match_is_scored_on_the_store_scale(host, notes, log_builder):
    L = log_builder
    store = host.store
    text = "milk and bread\nand more milk"
    store.import_log(L.header("stored", created_at=1, cwd=str(notes)), L.events([L.user(0, text)]))
    (notes / "c.md").write_text("Shopping\n" + "milk " * 5, encoding="utf-8")
    rows = run(host.services.session_query.search_candidates("milk", target_id=None, target_cwd=str(notes), limit=10))
    body = {row.id: row.score for row in rows if row.snippet is not None}
    assert body["stored"] == pytest.approx(store.score_body_texts("milk", [text])[0])
    assert body["notes:c.md"] == pytest.approx(store.score_body_texts("milk", ["Shopping\n" + "milk " * 5])[0])
    assert [row.id for row in rows if row.snippet is not None] == sorted(body, key=body.__getitem__)


def test_without_the_store_scale_body_matches_interleave_by_position():
    def row(sid, score):
        return CandidateRow(sid, 0, None, None, "…", score)

    store_rows = [row("s1", -9.0), row("s2", -1.0)]
    source_rows = [row("n1", -0.2), row("n2", -0.1)]
    merged = merge_candidates(store_rows, [source_rows], None, scored=False)
    assert [r.id for r in merged] == ["n1", "s1", "n2", "s2"]  # ties by id within a position
    assert [r.score for r in by_position(source_rows)] == [0.0, 1.0]


def test_pages_of_the_listing_walk_store_live_and_source_sessions_in_one_order(host, notes, log_builder):
    L = log_builder
    os.utime(notes / "a.md", ns=(0, 4_000_000))  # created at 4 ms, between the stored sessions
    os.utime(notes / "b.md", ns=(0, 2_000_000))
    for i, created in enumerate((1, 2, 3, 5, 6)):
        host.store.import_log(L.header(f"dsh-{i}", created_at=created), L.events([L.user(0, "stored")]))
    host.sessions.create("/w", "live", created_at=2)  # live only: ties with a note and a stored one
    query = host.services.session_query
    listing = run(query.list_sessions())
    assert [(r.id, r.source) for r in listing][:4] == [
        ("dsh-4", None),
        ("dsh-3", None),
        ("notes:a.md", "notes"),
        ("dsh-2", None),
    ]
    assert [r.last_activity_at is not None for r in listing] == [r.source is None for r in listing]
    for limit in (1, 2, 3, len(listing)):
        walked: list = []
        while True:
            key = (walked[-1].created_at, walked[-1].id) if walked else None
            page = run(query.list_sessions_page(limit, key))
            walked.extend(page)
            if len(page) < limit:
                break
        assert walked == listing


def test_without_cwd_groups_store_and_source_rank_by_match_then_newest(host, notes, log_builder):
    L = log_builder
    os.utime(notes / "a.md", ns=(0, 9_000_000))
    host.store.import_log(L.header("parser-no-cwd", created_at=1, cwd=None), L.events([L.user(0, "hello")]))
    host.store.import_log(L.header("parser-here", created_at=2, cwd="/here"), L.events([L.user(0, "hello")]))
    query = host.services.session_query

    def ids(**kwargs) -> list[str]:
        return [row.id for row in run(query.search_candidates("pars", target_id=None, limit=10, **kwargs))]

    assert ids(target_cwd=None) == ["parser-no-cwd", "notes:a.md", "parser-here"]  # cwd-less first
    assert ids(target_cwd="/here") == ["parser-here", "parser-no-cwd", "notes:a.md"]
    for target_cwd in (None, "/here"):
        assert ids(target_cwd=target_cwd, group_by_cwd=False) == ["notes:a.md", "parser-here", "parser-no-cwd"]


def test_a_host_without_sources_behaves_as_before(make_host, log_builder):
    host = make_host()
    assert not host.sources and host.sources.owner("notes:a.md") is None
    L = log_builder
    host.store.import_log(L.header("notes:a.md"), L.events([L.user(0, "a stored session with a colon")]))
    assert run(host.services.session_query.read_surface("notes:a.md")).header.id == "notes:a.md"
    asyncio.run(host.open_agent("notes:a.md"))


class Twice:
    @hookimpl
    def dsh_register_session_sources(self, register):
        register("twice", lambda host, table: None)
        register("twice", lambda host, table: None)


class Colon:
    @hookimpl
    def dsh_register_session_sources(self, register):
        register("a:b", lambda host, table: None)


@pytest.mark.parametrize(("plugin", "message"), [(Twice(), "already registered"), (Colon(), "without ':'")])
def test_a_bad_registration_is_an_error(make_host, plugin, message):
    host = make_host(objects={"bad": plugin})
    with pytest.raises(ValueError, match=message):
        source_factories(host.hook)


def test_a_source_table_is_validated_when_the_source_opens(make_host, notes):
    host = make_host(objects={"notes": NotesPlugin()}, config={"sources": {"notes": {"dir": str(notes), "x": 1}}})
    with pytest.raises(ConfigError, match=r"sources\.notes"):
        run(host.services.session_query.list_sessions())
