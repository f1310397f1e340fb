"""One order for the candidates of the store and of every source.

Candidates rank as the store ranks its own (`dsh_host.store.search.rank_key`): the target's cwd,
then no cwd, then any other; name matches before body matches; body matches by relevance; then
newest first. Relevance must be one measure for all of them, and BM25 scores from two indexes
are not one measure (each depends on its own index's document frequencies and lengths). So the
query service hands every source the store's `score_body_texts` when the store has one: a
source scores its body matches on the store's scale, as if the store held them, and they
compare with the store's own. A store without it (PostgreSQL ranks by `ts_rank`, which dsh does
not compute outside the database, and sending another agent's text to a shared server to be
ranked is not dsh's to do) gets rank interleaving instead: each backend's body matches take
their position in its own order as their score, so the best of each come first in turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

from dsh_host.sources.base import BodyScorer
from dsh_host.store.base import CandidateRow
from dsh_host.store.relevance import BodyTextScoring
from dsh_host.store.search import rank_key


def store_scorer(store: object) -> BodyScorer | None:
    """The store's `score_body_texts` when it has one: the scale every body match is scored on."""
    return store.score_body_texts if isinstance(store, BodyTextScoring) else None


def by_position(rows: Iterable[CandidateRow]) -> list[CandidateRow]:
    """`rows` with each body match's score replaced by its position among them (best first)."""
    rows = list(rows)
    body = sorted((row for row in rows if row.snippet is not None), key=lambda row: row.score)
    position = {row.id: float(index) for index, row in enumerate(body)}
    return [row if row.snippet is None else row._replace(score=position[row.id]) for row in rows]


def merge_candidates(
    store_rows: Sequence[CandidateRow],
    source_rows: Sequence[Sequence[CandidateRow]],
    target_cwd: str | None,
    *,
    scored: bool,
    grouped: bool = True,
) -> list[CandidateRow]:
    """The store's and the sources' candidates in one ranked list.

    `scored` says the sources were given the store's scale; without it, body matches are
    interleaved by their position in each backend's own order. Without `grouped` the cwd groups
    do not rank (see `SessionStore.search_candidates`).
    """
    groups: list[Sequence[CandidateRow]] = [store_rows, *source_rows]
    if not scored and any(row.snippet is not None for rows in source_rows for row in rows):
        groups = [by_position(rows) for rows in groups]
    return sorted(chain.from_iterable(groups), key=lambda row: rank_key(row, target_cwd, grouped))
