"""Scoring a text the store does not hold on the scale of the store's own body search.

Candidate search ranks body matches by a relevance that only means something against the
statistics of one index (BM25's document frequencies and average length). Texts from elsewhere
(the sessions of other agents, which session sources index on their own) compare with the
store's matches only when scored by the same measure with the same statistics: a store that
can do that offers `score_body_texts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class BodyTextScoring(Protocol):
    """A store that scores foreign texts as its body search would score its own nodes."""

    def score_body_texts(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """Each text's relevance for `query` on the scale of `search_candidates`' body matches.

        Lower is better, as `CandidateRow.score`. The text is scored as if it were one of the
        store's indexed nodes, with the store's statistics as they are (the text is not added
        to them). None when the store's index holds nothing to compare with.
        """
        ...
