"""Head retention of a sequence of items."""

from __future__ import annotations

from typing import Generic, TypeVar

from .budget import validate_budget
from .results import Omitted, PushDecision, RetainedItems

T = TypeVar("T")


class ItemRetainer(Generic[T]):
    """Keeps the first `max_items` items pushed and counts the rest exactly.

    Push every item, even once the budget is spent, so the omitted count stays exact.
    """

    def __init__(self, max_items: int) -> None:
        self._max_items = validate_budget("maxItems", max_items)
        self._items: list[T] = []
        self._seen = 0

    def push(self, item: T) -> PushDecision:
        """Offer one item; it is kept while the budget lasts."""
        self._seen += 1
        if len(self._items) < self._max_items:
            self._items.append(item)
            return PushDecision(kept=True, truncated=self._omitted > 0)
        return PushDecision(kept=False, truncated=True)

    def finish(self) -> RetainedItems[T]:
        """Return the kept items with the counts of items seen, kept and omitted."""
        omitted = self._omitted
        return RetainedItems(
            items=tuple(self._items),
            truncated=omitted > 0,
            seen=self._seen,
            kept=len(self._items),
            omitted=Omitted.exact(omitted) if omitted else Omitted.none(),
        )

    @property
    def _omitted(self) -> int:
        return self._seen - len(self._items)
