"""The SQLite store scores a text it does not hold exactly as FTS5 scores its own nodes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_host import SqliteSessionStore
from dsh_host.sources import BodyTextScoring
from dsh_host.testing import LogBuilder as L

pytestmark = pytest.mark.foreign_logs

TEXTS = [
    "the quick brown fox",
    "quick quick fox jumps over the lazy dog again and again, l'été dernier",
    "a lazy brown dog",
    "unrelated words only here",
    "Café crème, déjà vu: the fox",
    "x y z",
]


@pytest.fixture
def store(tmp_path):
    store = SqliteSessionStore.open(tmp_path / "s.sqlite3")
    for i, text in enumerate(TEXTS):
        store.import_log(L.header(f"s{i}", created_at=i, cwd="/w"), L.events([L.user(0, text)]))
    yield store
    store.close()


def test_the_sqlite_store_offers_scoring():
    assert issubclass(SqliteSessionStore, BodyTextScoring)


@pytest.mark.parametrize("query", ["quick fox", "lazy", "l'été dog", "ete", "cafe", "FOX the"])
def test_a_stored_text_scores_as_the_store_ranks_it(store, query):
    rows = [row for row in store.search_candidates(query, target_id=None, target_cwd="/w", limit=10) if row.snippet]
    assert rows
    scores = store.score_body_texts(query, [TEXTS[int(row.id[1:])] for row in rows])
    assert scores == pytest.approx([row.score for row in rows], rel=1e-12)


def test_a_foreign_text_scores_with_the_store_statistics(store):
    more, fewer = store.score_body_texts("fox", ["fox fox fox in a box", "a fox in a big box with many other words"])
    assert more < fewer < 0


def test_nothing_indexed_means_nothing_to_compare_with(tmp_path):
    empty = SqliteSessionStore.open(tmp_path / "empty.sqlite3")
    try:
        assert empty.score_body_texts("fox", ["fox"]) is None
    finally:
        empty.close()


def test_a_query_without_words_scores_zero(store):
    assert store.score_body_texts("  ' ", ["fox", "dog"]) == [0.0, 0.0]
    assert store.score_body_texts("fox", []) == []


@given(st.text(max_size=200), st.text(min_size=1, max_size=30))
def test_any_text_and_query_score_without_error(tmp_path_factory, text, query):
    store = SqliteSessionStore.open(tmp_path_factory.mktemp("s") / "s.sqlite3")
    try:
        store.import_log(L.header("s"), L.events([L.user(0, "some indexed text")]))
        scores = store.score_body_texts(query, [text, text + " " + query])
        assert scores is not None and len(scores) == 2
    finally:
        store.close()
