"""`search_candidates`, run against every store (tests/store_backends.py): name matches exactly as
`rank_candidates` makes them, body matches on the surface a reference shows, ranking, snippets,
queries that are never syntax, and cancellation.
"""

from __future__ import annotations

import itertools
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session
from dsh_host.store.base import SearchCancelled
from dsh_host.store.search import (
    CHECKPOINT_SOURCE_KIND,
    CHECKPOINT_SOURCE_PLUGIN,
    SNIPPET_CHARS,
    rank_key,
    snippet_cutter,
)
from dsh_session_reference.candidates import rank_candidates

# Its logs are built by hand (turnless fixtures), not written by dsh.
pytestmark = pytest.mark.foreign_logs

USER = {"kind": "user"}
CHECKPOINT = dict(COMPACT_CHECKPOINT_SOURCE)


def text(value: str) -> list[dict]:
    return [{"type": "text", "text": value}]


def write(store, session_id: str, *, cwd: str | None = "/w", created_at: int = 0, title: str | None = None,
          prompts: tuple[str, ...] = (), answers: tuple[str, ...] = ()) -> Session:  # fmt: skip
    session = Session(SessionHeader(id=session_id, created_at=created_at, cwd=cwd))
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})
    for prompt in prompts:
        session.append("user/message", {"content": text(prompt), "source": USER}, surface_op="append")
    for answer in answers:
        session.append(
            "assistant/message", {"turn": 1, "step": 1, "content": text(answer), "provenance": {}}, surface_op="append"
        )
    if title is not None:
        session.append("session/title", {"title": title, "messageSeqs": [], "source": USER})
    store.append(session.header, list(session.events))
    return session


def search(store, query: str, *, target_id: str | None = "target", target_cwd: str | None = "/w", limit: int = 50):
    return store.search_candidates(query, target_id=target_id, target_cwd=target_cwd, limit=limit)


def ids(rows) -> list[str]:
    return [row.id for row in rows]


def test_the_checkpoint_source_is_compactions_marker():
    assert {"kind": CHECKPOINT_SOURCE_KIND, "plugin": CHECKPOINT_SOURCE_PLUGIN} == CHECKPOINT


def test_body_matches_rank_after_name_matches_within_each_cwd_group(store):
    write(store, "target", prompts=("the migration bug",))
    write(store, "named-migration", cwd="/other", created_at=5)
    write(store, "same-body", created_at=1, prompts=("we fixed the migration today",))
    write(store, "same-title", created_at=2, title="Migration fix")
    write(store, "cwdless-body", cwd=None, created_at=3, answers=("a migration",))
    write(store, "unrelated", created_at=4, prompts=("nothing of the kind",))

    rows = search(store, "MIGRATION")

    assert ids(rows) == ["same-title", "same-body", "cwdless-body", "named-migration"]
    assert [row.snippet is None for row in rows] == [True, False, False, True]
    assert rows[1].snippet == "we fixed the migration today"
    assert rows[0].title == "Migration fix" and rows[0].cwd == "/w" and rows[0].created_at == 2
    assert ids(search(store, "migration", limit=2)) == ["same-title", "same-body"]


def test_without_cwd_groups_name_matches_rank_first_then_newest_whatever_the_cwd(store):
    write(store, "target", prompts=("the migration bug",))
    write(store, "named-migration", cwd="/other", created_at=5)
    write(store, "same-body", created_at=1, prompts=("we fixed the migration today",))
    write(store, "same-title", created_at=2, title="Migration fix")
    write(store, "cwdless-body", cwd=None, created_at=3, answers=("a migration",))
    write(store, "cwdless-named", cwd=None, created_at=0, title="migration, no cwd")

    for target_cwd in ("/w", None):  # the cwd asked for makes no difference
        rows = store.search_candidates(
            "MIGRATION", target_id="target", target_cwd=target_cwd, limit=50, group_by_cwd=False
        )
        assert ids(rows) == ["named-migration", "same-title", "cwdless-named", "cwdless-body", "same-body"]
        every = store.search_candidates("", target_id=None, target_cwd=target_cwd, limit=3, group_by_cwd=False)
        assert ids(every) == ["named-migration", "cwdless-body", "same-title"]  # newest first
    # Grouped, as the `@` completion ranks: no cwd first when the target has none.
    grouped = store.search_candidates("MIGRATION", target_id="target", target_cwd=None, limit=50)
    assert ids(grouped) == ["cwdless-named", "cwdless-body", "named-migration", "same-title", "same-body"]


def test_body_matches_rank_by_relevance_then_newest(store):
    write(store, "once", created_at=1, prompts=("deploy the parser and then lots of other words to dilute it",))
    write(store, "often", created_at=0, prompts=("parser parser parser",))
    write(store, "tie-old", created_at=2, prompts=("no match",), answers=("zebra",))
    write(store, "tie-new", created_at=3, prompts=("no match",), answers=("zebra",))

    assert ids(search(store, "parser")) == ["often", "once"]
    assert ids(search(store, "zebra")) == ["tie-new", "tie-old"]


def test_every_word_must_occur_in_one_message(store):
    write(store, "apart", prompts=("the migration",), answers=("found the bug",))
    write(store, "together", prompts=("the migration only",), answers=("the bug in the Migration",))
    assert ids(search(store, "bug migration")) == ["together"]
    assert ids(search(store, "bug  \t migration\n")) == ["together"]


def test_only_the_surface_a_reference_shows_is_searched(store, log_builder):
    session = Session(SessionHeader(id="s", created_at=0, cwd="/w"))
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})
    session.append("user/message", {"content": text("userword"), "source": USER}, surface_op="append")
    plugin = {"kind": "plugin", "plugin": "other"}
    session.append("user/message", {"content": text("pluginword"), "source": plugin}, surface_op="append")
    session.append("steering/message", {"content": text("steerword"), "source": USER}, surface_op="append")
    session.append("steering/message", {"content": text("plugsteer"), "source": plugin}, surface_op="append")
    content = [{"type": "reasoning", "text": "thinkword"}, *text("answerword")]
    chunk = {"type": "text-delta", "index": 0, "text": "chunkword"}
    chunk_seq = session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}).seq
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "content": content, "provenance": {}},
        surface_op="append",
        sources=[chunk_seq],
    )
    session.append(
        "tool/result",
        {"turn": 1, "step": 1, "callId": "c", "content": text("toolword"), "isError": False},
        surface_op="append",
    )
    session.append(
        "context/message",
        {"content": text("contextword"), "source": plugin},
        surface_op="append",
    )
    store.append(session.header, list(session.events))

    found = {word for word in ("userword", "steerword", "answerword") if ids(search(store, word)) == ["s"]}
    assert found == {"userword", "steerword", "answerword"}
    for hidden in ("pluginword", "plugsteer", "thinkword", "chunkword", "toolword", "contextword"):
        assert search(store, hidden) == [], hidden


def test_compaction_removes_folded_text_and_finds_the_checkpoint(store):
    session = write(store, "s", prompts=("ancient walrus talk", "recent talk"))
    first, second = session.surface.nodes
    compaction = session.append(
        "user/message",
        {"content": text("summary of the otter chat"), "source": CHECKPOINT},
        surface_op={"op": "replace", "start": first, "end": first},
        sources=[first],
    )
    store.append(session.header, [compaction])

    assert search(store, "walrus") == []
    assert [(r.id, r.snippet) for r in search(store, "otter")] == [("s", "summary of the otter chat")]
    assert ids(search(store, "recent")) == ["s"]
    assert second in session.surface.nodes


def test_replacing_or_deleting_a_session_removes_it_from_search(store):
    session = write(store, "s", title="Walrus", prompts=("walrus",))
    store.import_log(session.header, [], replace=True)
    assert search(store, "walrus") == []
    write(store, "t", title="Otter", prompts=("otter",))
    store.delete("t")
    assert search(store, "otter") == []
    assert search(store, "") == [search(store, "s")[0]]


def test_the_latest_title_is_what_names_match(store):
    session = Session(SessionHeader(id="s", created_at=0, cwd="/w"))
    for title in ("Walrus", "Otter"):
        session.append("session/title", {"title": title, "messageSeqs": [], "source": USER})
    store.append(session.header, session.events[:1])
    assert ids(search(store, "walrus")) == ["s"]
    store.append(session.header, session.events[1:])
    assert search(store, "walrus") == [] and ids(search(store, "otter")) == ["s"]


def test_snippets_are_short_and_around_the_match(store):
    long = " ".join(f"w{i}" for i in range(200)) + " needle " + " ".join(f"v{i}" for i in range(200))
    write(store, "s", answers=(long,))
    (row,) = search(store, "needle")
    assert "needle" in row.snippet and len(row.snippet) < 120


@given(text=st.text(alphabet=st.sampled_from("ab \t\n\u00a0\u2028é"), max_size=120))
def test_a_snippet_never_starts_or_ends_with_whitespace_and_collapses_runs(text):
    snippet = snippet_cutter(["needle"])(text)
    flat = " ".join(text.split())
    assert snippet == snippet.strip() and "  " not in snippet
    if len(text) <= SNIPPET_CHARS:
        assert snippet == flat  # a short text is shown whole
    else:
        assert flat.startswith(snippet.rstrip("…"))  # no match: its start


SYNTAX = ['"', '""', "'", "*", "a*", "NEAR", "NEAR(a b)", "a OR b", "a AND", "NOT", "(", ")", "((a", "a)", "^a",
          "-a", "+a", "col:a", "text:a", "{a b}", "\x00", "\x1b[31m", "a\nb", "\ud800", "&|!", ":*", "\\"]  # fmt: skip


@pytest.mark.parametrize("query", SYNTAX)
def test_syntax_is_searched_as_plain_words(store, query):
    # As FTS syntax, `a*`, `a OR b`, `NOT x`, `{a b}`, ... would find this one; as words they do not.
    write(store, "plain", prompts=("abc b text ab",))
    write(store, "quoted", title=f"see {query} here", prompts=("x",))
    assert ids(search(store, query)) == ["quoted"]


_chars = st.characters(codec=None, min_codepoint=0, max_codepoint=0x2FFF) | st.sampled_from("aAİẞ-/\ud800\udcff")
_names = st.text(alphabet=_chars, max_size=8)
_counter = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sessions=st.lists(st.tuples(_names, st.none() | _names, st.none() | _names, st.integers(0, 3)), max_size=6),
    query=_names,
    limit=st.integers(1, 4),
)
def test_name_matches_are_rank_candidates_exactly(shared_store, sessions, query, limit):
    """Any text: the name matches, in order, are what the listing-based ranking returns."""
    prefix = f"p{next(_counter)}:"
    for i, (name, cwd, title, created) in enumerate(sessions):
        cwd = None if cwd is None else prefix + cwd
        write(shared_store, f"{prefix}{i}{name}", cwd=cwd, created_at=created, title=title)
    mine = [row for row in shared_store.list_sessions() if row.id.startswith(prefix)]
    target_cwd = prefix + "x"
    expected = rank_candidates(mine, target_id=prefix, target_cwd=target_cwd, query=prefix + query, limit=limit)
    # The prefix keeps other examples' sessions out; body matches are not compared here.
    rows = search(shared_store, prefix + query, target_id=prefix, target_cwd=target_cwd, limit=limit)
    names = [row for row in rows if row.snippet is None]
    assert [(r.id, r.title if r.title is not None else r.id, r.cwd, r.created_at) for r in names] == [
        (c.session_id, c.label, c.cwd, c.created_at) for c in expected
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sessions=st.lists(
        st.tuples(st.sampled_from(["/a", "/b", None]), st.integers(0, 2), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    limit=st.integers(1, 5),
    grouped=st.booleans(),
    target=st.integers(0, 8),
)
def test_a_limited_search_is_the_head_of_the_whole_ranking(shared_store, sessions, limit, grouped, target):
    """Name and body matches tied in relevance and creation time (the same text, the same
    second) go by id, one row per session, and a limit cuts exactly that order."""
    n = next(_counter)
    word = f"tusk{n}x"  # in no other example's title, nor in any id
    matching = set()
    for i, (cwd, created, messages, named) in enumerate(sessions):
        session_id = f"s{n}-{(5 * i) % 9}-{i}"  # ids out of creation order
        prompts = tuple(f"{word} and more" if n % 2 else f"{word} {word}" for n in range(messages))
        write(shared_store, session_id, cwd=cwd, created_at=created, title=word if named else None, prompts=prompts)
        if messages or named:
            matching.add(session_id)
    target_id = f"s{n}-{(5 * target) % 9}-{target}" if target < len(sessions) else None

    def ranked(limit: int):
        rows = shared_store.search_candidates(
            word, target_id=target_id, target_cwd="/a", limit=limit, group_by_cwd=grouped
        )
        return [(r.id, r.snippet is None, r.score, r.created_at) for r in rows], rows

    whole, rows = ranked(50)
    assert {row.id for row in rows} == matching - {target_id}
    assert rows == sorted(rows, key=lambda row: rank_key(row, "/a", grouped))
    assert ranked(limit)[0] == whole[:limit]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=30) | st.lists(st.sampled_from([*SYNTAX, "word", " "])).map("".join))
def test_no_query_raises(shared_store, query):
    search(shared_store, query, limit=3)


def test_an_empty_query_lists_every_session_ranked(store):
    write(store, "target")
    write(store, "other", cwd="/o", created_at=9)
    write(store, "none", cwd=None, created_at=1)
    write(store, "same", created_at=0)
    assert ids(search(store, "")) == ["same", "none", "other"]
    assert ids(search(store, "", target_cwd=None)) == ["none", "other", "same"]


def test_a_set_cancel_event_stops_the_search(store):
    write(store, "s", prompts=("walrus",))
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(SearchCancelled):
        store.search_candidates("walrus", target_id=None, target_cwd=None, limit=5, cancel=cancel)
    # The store is usable afterwards.
    assert ids(store.search_candidates("walrus", target_id=None, target_cwd=None, limit=5)) == ["s"]
