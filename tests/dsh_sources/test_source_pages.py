"""The sources page from their index: the listing by last activity, and a conversation a page at a time."""

from __future__ import annotations

import asyncio

import pytest

from dsh_host.sources import PagedSource
from tests.dsh_sources.builders import BASE_MS, ClaudeTranscript

pytestmark = pytest.mark.foreign_logs


def run(coro):
    return asyncio.run(coro)


def transcript(base, *, clock: int, cwd: str, turns: int = 1, session_id: str | None = None) -> ClaudeTranscript:
    t = ClaudeTranscript(cwd=cwd, clock=clock) if session_id is None else ClaudeTranscript(cwd, session_id, clock=clock)
    for i in range(turns):
        t.user(f"question {i}")
        t.reply(("text", f"answer {i}"))
    t.write(base)
    return t


def test_the_listing_by_activity_pages_from_the_index_in_one_order(source_host, agent_dirs, log_builder):
    # Ties on purpose: sessions whose last records share a time, told apart by id.
    for i, (clock, cwd) in enumerate([(0, "/a"), (0, "/b"), (5000, "/a"), (5000, "/a"), (9000, "/b"), (2000, "/a")]):
        transcript(
            agent_dirs.claude, clock=BASE_MS + clock, cwd=cwd, session_id=f"00000000-0000-0000-0000-00000000000{i}"
        )
    host = source_host()
    L = log_builder
    host.store.import_log(L.header("mine", cwd="/a"), L.events([{**L.user(0), "time": BASE_MS + 4000}]))
    source = host.sources.get("claude-code")
    assert isinstance(source, PagedSource)
    everything = sorted(source.list_sessions(), key=lambda row: (-row.last_activity_at, row.id))
    for cwd in (None, "/a", "/b"):
        expected = [row for row in everything if cwd is None or row.cwd == cwd]
        for limit in range(1, len(everything) + 1):
            walked: list = []
            while True:
                after = (walked[-1].last_activity_at, walked[-1].id) if walked else None
                page = source.list_sessions_by_activity(limit, after, cwd)
                walked += page
                if len(page) < limit:
                    break
            assert walked == expected
    assert sorted(source.list_cwds()) == ["/a", "/b"]

    query = host.services.session_query
    records = []
    page = run(query.list_page(limit=2))
    while True:
        records += page.records
        if page.next is None:
            break
        page = run(query.list_page(limit=2, after=page.next))
    listed = run(query.list_sessions())
    assert records == sorted(listed, key=lambda r: (-r.last_activity_at, r.id))
    assert [r.agent for r in records if r.source == "claude-code"] == ["Claude Code"] * 6
    agent_page = run(query.list_page(agent="claude-code", cwd="/b", limit=10))
    assert [r.id for r in agent_page.records] == [r.id for r in records if r.source == "claude-code" and r.cwd == "/b"]
    assert run(query.list_cwds(agent="claude-code")) == ["/a", "/b"]


def test_a_conversation_page_reads_only_its_messages(source_host, agent_dirs, monkeypatch):
    t = transcript(agent_dirs.claude, clock=BASE_MS, cwd="/w", turns=30)
    t.compact("what was said so far")
    t.user("after the summary")
    t.reply(("text", "last answer"))
    t.write(agent_dirs.claude)
    host = source_host()
    sid = f"claude-code:{t.session_id}"
    query = host.services.session_query
    whole = run(query.read_surface(sid)).events
    source = host.sources.get("claude-code")
    asked: list[tuple[int, int]] = []
    messages = source.index.messages

    def counted(session, start=0, stop=1 << 20):
        asked.append((start, stop))
        return messages(session, start, stop)

    monkeypatch.setattr(source.index, "messages", counted)
    pages = [run(query.read_surface_page(sid, limit=4))]
    while pages[-1].before is not None:
        pages.append(run(query.read_surface_page(sid, before=pages[-1].before, limit=4)))
    entries = [entry for page in reversed(pages) for entry in page.entries]
    assert [(e.position, e.seq, e.time, e.text) for e in entries] == [
        (event["seq"], event["seq"], event["time"], "\n".join(b["text"] for b in event["data"]["content"]))
        for event in whole
    ]
    assert [e.kind for e in entries][-3:] == ["checkpoint", "user", "assistant"]
    assert entries[-3].text == whole[-3]["data"]["content"][0]["text"]
    assert all(stop - start <= 5 for start, stop in asked), asked
    assert pages[0].captured_through_seq == len(whole) - 1
    title = run(query.read_title(sid))
    assert title is not None
    assert all((page.header, page.title) == (run(query.read_header(sid)), title.title) for page in pages)
