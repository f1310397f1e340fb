"""`SessionReferenceService.list_candidates`: ranking, query and limit, title matching, errors.

Our service matches the query against the id, the cwd and the latest title (the reference
matched id and cwd only), and labels a candidate with its latest title when it has one.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_host import display_inline_text
from dsh_host.host import Host
from dsh_host.query import SessionRecord
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session
from dsh_session_reference import ErrorCode, SessionReferenceError, SessionReferenceService
from dsh_session_reference.candidates import Candidate, rank_candidates
from dsh_session_reference.terminal import candidate_completion
from tests.dsh_session_reference.conftest import unreported_errors

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs

# id, cwd, createdAt, titles (oldest first)
CANDIDATE_SESSIONS: list[tuple[str, str | None, int, tuple[str, ...]]] = [
    ("target", "/same", 10, ()),
    ("other", "/else", 40, ()),
    ("none", None, 30, ()),
    ("same", "/same", 20, ()),
    ("same-later", "/same", 25, ("Older title", "Latest title")),
]
RANKED_CANDIDATES = [
    {"sessionId": "same-later", "label": "Latest title", "cwd": "/same", "createdAt": 25},
    {"sessionId": "same", "label": "same", "cwd": "/same", "createdAt": 20},
    {"sessionId": "none", "label": "none", "createdAt": 30},
    {"sessionId": "other", "label": "other", "cwd": "/else", "createdAt": 40},
]


def add_sessions(host: Host, where: str, sessions: list[tuple[str, str | None, int, tuple[str, ...]]]) -> None:
    """Create the sessions live, or write them to the store only."""
    for session_id, cwd, created_at, titles in sessions:
        if where == "live":
            session = host.sessions.create(cwd, session_id, created_at=created_at)
        else:
            session = Session(SessionHeader(id=session_id, created_at=created_at, cwd=cwd))
        for title in titles:
            session.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": "user"}})
        if where == "store":
            if session.seq:
                host.store.append(session.header, list(session.events))
            else:
                host.store.import_log(session.header, [])


async def target_of(host: Host, where: str, session_id: str = "target") -> Any:
    if where == "live":
        return host.sessions.get(session_id)
    return await host.services.session_query.read_header(session_id)


def as_json(candidates: list[Any]) -> list[dict[str, Any]]:
    return [candidate.to_json() for candidate in candidates]


@pytest.mark.parametrize("where", ["live", "store"])
async def test_ranking_same_cwd_then_no_cwd_then_others(make_host, where: str) -> None:
    host = make_host()
    add_sessions(host, where, CANDIDATE_SESSIONS)
    target = await target_of(host, where)

    found = await host.services.session_references.list_candidates(target)

    assert as_json(found) == RANKED_CANDIDATES
    assert [list(c) for c in as_json(found)] == [
        ["sessionId", "label", "cwd", "createdAt"],
        ["sessionId", "label", "cwd", "createdAt"],
        ["sessionId", "label", "createdAt"],
        ["sessionId", "label", "cwd", "createdAt"],
    ]
    assert [(c.session_id, c.label, c.cwd, c.created_at) for c in found][2] == ("none", "none", None, 30)


@pytest.mark.parametrize("where", ["live", "store"])
async def test_the_query_matches_the_cwd_and_the_limit_cuts(make_host, where: str) -> None:
    host = make_host()
    add_sessions(host, where, CANDIDATE_SESSIONS)
    target = await target_of(host, where)
    service = host.services.session_references

    assert as_json(await service.list_candidates(target, "els", 1)) == [
        {"sessionId": "other", "label": "other", "cwd": "/else", "createdAt": 40}
    ]
    assert as_json(await service.list_candidates(target, "ELS", limit=5)) == [RANKED_CANDIDATES[3]]
    assert [c.session_id for c in await service.list_candidates(target, "same")] == ["same-later", "same"]
    assert [c.session_id for c in await service.list_candidates(target, "", 2)] == ["same-later", "same"]
    assert await service.list_candidates(target, "nothing matches this") == []


@pytest.mark.parametrize("where", ["live", "store"])
async def test_query_matches_the_latest_title_only(make_host, where: str) -> None:
    host = make_host()
    add_sessions(host, where, CANDIDATE_SESSIONS)
    target = await target_of(host, where)
    service = host.services.session_references

    assert as_json(await service.list_candidates(target, "latest")) == [RANKED_CANDIDATES[0]]
    assert as_json(await service.list_candidates(target, "LATEST TI")) == [RANKED_CANDIDATES[0]]
    # Only the latest title counts.
    assert await service.list_candidates(target, "older") == []


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "1", 2**53])
async def test_an_invalid_limit_is_refused(make_host, limit: Any) -> None:
    host = make_host()
    add_sessions(host, "live", CANDIDATE_SESSIONS)
    with pytest.raises(SessionReferenceError) as info:
        await host.services.session_references.list_candidates(host.sessions.get("target"), "", limit)
    assert info.value.code == ErrorCode.INVALID_REFERENCE
    assert str(info.value) == "candidate limit must be a positive safe integer"


async def test_limit_none_means_the_configured_default(make_host) -> None:
    host = make_host(candidate_limit=2)
    add_sessions(host, "live", CANDIDATE_SESSIONS)
    service = host.services.session_references
    target = host.sessions.get("target")
    assert [c.session_id for c in await service.list_candidates(target)] == ["same-later", "same"]
    assert [c.session_id for c in await service.list_candidates(target, "", None)] == ["same-later", "same"]
    assert len(await service.list_candidates(target, "", 10)) == 4


async def test_target_without_cwd_puts_cwdless_sessions_first(make_host) -> None:
    host = make_host()
    add_sessions(
        host,
        "store",
        [
            *CANDIDATE_SESSIONS,
            ("target-nowhere", None, 5, ()),
            ("none-older", None, 1, ()),
            ("b-tie", "/tie", 40, ()),
        ],
    )
    target = await target_of(host, "store", "target-nowhere")
    found = await host.services.session_references.list_candidates(target)
    # Cwd-less first, then every other session; newest first (ties by id) within each group.
    assert [c.session_id for c in found] == [
        "none",
        "none-older",
        "b-tie",
        "other",
        "same-later",
        "same",
        "target",
    ]


class HangingQuery:
    """A query whose `search_candidates` waits until released, then fails."""

    def __init__(self) -> None:
        self.calls = 0
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def search_candidates(self, query: str, **_: Any) -> list[SessionRecord]:
        self.calls += 1
        self.called.set()
        await self.release.wait()
        raise RuntimeError("listing failed after all")


def cancel_signal(reason: str, *, set_: bool = False) -> asyncio.Event:
    event = asyncio.Event()
    event.reason = reason  # type: ignore[attr-defined]
    if set_:
        event.set()
    return event


TARGET = SessionHeader(id="target", created_at=0, cwd="/same")


async def test_a_cancel_wins_over_a_listing_that_never_settles(loop_errors: list[dict[str, Any]]) -> None:
    query = HangingQuery()
    service = SessionReferenceService(query)
    cancel = cancel_signal("autocomplete superseded")
    task = asyncio.ensure_future(service.list_candidates(TARGET, "x", None, cancel))
    await query.called.wait()
    assert query.calls == 1 and not task.done()  # the listing holds it

    cancel.set()
    await asyncio.wait({task})
    assert not query.release.is_set()
    with pytest.raises(SessionReferenceError) as info:
        await task
    assert info.value.code == ErrorCode.CANCELLED
    assert info.value.cause == "autocomplete superseded"
    del info, task  # the error's traceback holds the abandoned listing, which must be collectable

    query.release.set()
    assert await unreported_errors(loop_errors) == []


async def test_already_cancelled_lists_nothing_but_limit_is_checked_first() -> None:
    query = HangingQuery()
    service = SessionReferenceService(query)
    done = cancel_signal("host cancelled", set_=True)
    with pytest.raises(SessionReferenceError) as info:
        await service.list_candidates(TARGET, "", None, done)
    assert info.value.code == ErrorCode.CANCELLED
    with pytest.raises(SessionReferenceError) as info:
        await service.list_candidates(TARGET, "", 0, done)
    assert info.value.code == ErrorCode.INVALID_REFERENCE
    assert query.calls == 0


class FailingQuery:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def search_candidates(self, query: str, **_: Any) -> list[SessionRecord]:
        raise self.error


@pytest.mark.parametrize("with_signal", [False, True])
async def test_listing_errors_propagate_unwrapped(with_signal: bool) -> None:
    error = OSError("database is locked")
    service = SessionReferenceService(FailingQuery(error))
    with pytest.raises(OSError) as info:
        await service.list_candidates(TARGET, "", None, cancel_signal("unused") if with_signal else None)
    assert info.value is error


async def test_candidates_never_include_the_target_and_accept_any_target_shape(make_host) -> None:
    host = make_host()
    add_sessions(host, "live", CANDIDATE_SESSIONS)
    service = host.services.session_references
    session = host.sessions.get("target")
    for target in (session, session.header, await host.services.session_query.read_header("target")):
        found = await service.list_candidates(target, "target")
        assert found == []
        assert as_json(await service.list_candidates(target)) == RANKED_CANDIDATES


async def test_label_is_the_title_even_when_empty(make_host) -> None:
    host = make_host()
    add_sessions(host, "live", [("target", "/t", 1, ()), ("blank", "/t", 2, ("",))])
    [candidate] = await host.services.session_references.list_candidates(host.sessions.get("target"))
    assert (candidate.session_id, candidate.label) == ("blank", "")


RECORD = st.builds(
    lambda i, cwd, title, created: SessionRecord(f"s{i}", created, cwd, title, created, live=False, persisted=True),
    st.integers(0, 40),
    st.one_of(st.none(), st.sampled_from(["/a", "/b", "/A/x"])),
    st.one_of(st.none(), st.sampled_from(["", "Alpha", "beta notes", "/a"])),
    st.integers(0, 5),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(RECORD, max_size=25, unique_by=lambda r: r.id).map(
        lambda rs: sorted(rs, key=lambda r: (-r.created_at, r.id))
    ),
    st.one_of(st.none(), st.sampled_from(["/a", "/b"])),
    st.sampled_from(["", "a", "S1", "/A", "notes", "zzz"]),
    st.integers(1, 30),
)
def test_ranking_equals_a_plain_filter_and_stable_sort(records, target_cwd, query, limit) -> None:
    target_id = records[0].id if records else "nobody"

    def rank(record: SessionRecord) -> int:
        if record.cwd is not None and target_cwd is not None and record.cwd == target_cwd:
            return 0
        return 1 if record.cwd is None else 2

    needle = query.lower()
    matched = [
        r
        for r in records
        if r.id != target_id
        and (not needle or any(v is not None and needle in v.lower() for v in (r.id, r.cwd, r.title)))
    ]
    expected = [
        (r.id, r.title if r.title is not None else r.id, r.cwd, r.created_at) for r in sorted(matched, key=rank)[:limit]
    ]
    found = rank_candidates(records, target_id=target_id, target_cwd=target_cwd, query=query, limit=limit)
    assert [(c.session_id, c.label, c.cwd, c.created_at) for c in found] == expected


# -- body matches (the store's search) ---------------------------------------------------------


def stored_chat(host: Host, session_id: str, cwd: str | None, created_at: int, prompt: str) -> Session:
    session = Session(SessionHeader(id=session_id, created_at=created_at, cwd=cwd))
    session.append("user/message", {"content": [{"type": "text", "text": prompt}], "source": {"kind": "user"}},
                   surface_op="append")  # fmt: skip
    host.store.append(session.header, list(session.events))
    return session


async def test_body_matches_carry_a_snippet_and_rank_after_name_matches(make_host) -> None:
    host = make_host()
    add_sessions(host, "store", CANDIDATE_SESSIONS)
    stored_chat(host, "fixer", "/same", 1, "we fixed the migration bug in the else branch")
    target = await target_of(host, "store")

    found = await host.services.session_references.list_candidates(target, "else")

    assert [(c.session_id, c.snippet) for c in found] == [
        ("fixer", "we fixed the migration bug in the else branch"),
        ("other", None),
    ]
    assert found[0].to_json() == {
        "sessionId": "fixer",
        "label": "fixer",
        "cwd": "/same",
        "createdAt": 1,
        "snippet": "we fixed the migration bug in the else branch",
    }
    assert [c.session_id for c in await host.services.session_references.list_candidates(target, "migration")] == [
        "fixer"
    ]


async def test_a_live_sessions_unflushed_title_is_what_it_matches_on(make_host) -> None:
    host = make_host()
    stored = stored_chat(host, "chat", "/w", 1, "walrus talk")
    live = await host.sessions.resume("chat")
    live.append("session/title", {"title": "Otter plans", "messageSeqs": [], "source": {"kind": "user"}})
    assert stored.seq == 1 and live.seq == 2  # the title is not in the store
    service = host.services.session_references
    target = SessionHeader(id="target", created_at=0, cwd="/w")

    assert [(c.session_id, c.label) for c in await service.list_candidates(target, "otter")] == [
        ("chat", "Otter plans")
    ]
    assert [(c.session_id, c.label, c.snippet) for c in await service.list_candidates(target, "walrus")] == [
        ("chat", "Otter plans", "walrus talk")
    ]


async def test_a_superseded_search_is_stopped_in_the_store(make_host) -> None:
    host = make_host()
    stored_chat(host, "chat", "/w", 1, "walrus")
    started, stopped = threading.Event(), threading.Event()
    search = host.store.search_candidates

    def blocking(query, *, cancel, **kwargs):
        started.set()
        if cancel.wait(timeout=30):
            stopped.set()
        return search(query, cancel=cancel, **kwargs)

    host.store.search_candidates = blocking
    cancel = cancel_signal("typing went on")
    task = asyncio.ensure_future(host.services.session_references.list_candidates(TARGET, "walrus", None, cancel))
    await asyncio.to_thread(started.wait, 30)
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        await task
    assert info.value.code == ErrorCode.CANCELLED
    assert await asyncio.to_thread(stopped.wait, 30)


def test_a_body_match_shows_its_snippet_last_in_the_menu_terminal_safe() -> None:
    snippet = "fixed the \x1b[31mbug\n"
    item = candidate_completion(Candidate("s", "Title", "/w", 0, snippet))
    assert item.meta == "s · /w · 1970-01-01T00:00:00.000Z · " + display_inline_text(snippet)
    assert "\x1b" not in item.meta and "\n" not in item.meta
    assert candidate_completion(Candidate("s", "Title", "/w", 0)).meta == "s · /w · 1970-01-01T00:00:00.000Z"
