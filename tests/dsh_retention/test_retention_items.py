"""ItemRetainer: keeping the first items within an item budget and counting the rest."""

from __future__ import annotations

import pytest

from dsh_retention import ItemRetainer, Omitted, PushDecision, RetainedItems


def test_max_two_keeps_first_two_and_counts_the_rest() -> None:
    retainer: ItemRetainer[str] = ItemRetainer(2)

    decisions = [retainer.push(item) for item in "abc"]

    assert decisions == [
        PushDecision(kept=True, truncated=False),
        PushDecision(kept=True, truncated=False),
        PushDecision(kept=False, truncated=True),
    ]
    assert retainer.finish() == RetainedItems(
        items=("a", "b"), truncated=True, seen=3, kept=2, omitted=Omitted.exact(1)
    )


@pytest.mark.parametrize(("max_items", "pushed", "omitted"), [(1, "abc", 2), (0, "a", 1)])
def test_omitted_count_is_exact(max_items: int, pushed: str, omitted: int) -> None:
    retainer: ItemRetainer[str] = ItemRetainer(max_items)
    for item in pushed:
        retainer.push(item)

    result = retainer.finish()

    assert result.omitted == Omitted.exact(omitted)
    assert result.truncated
    assert result.kept == max_items


def test_nothing_omitted_reports_none() -> None:
    retainer: ItemRetainer[int] = ItemRetainer(3)
    retainer.push(1)

    assert retainer.finish() == RetainedItems(items=(1,), truncated=False, seen=1, kept=1, omitted=Omitted.none())
