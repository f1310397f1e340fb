"""describe_omitted and format_retention_notice: how what was omitted is described."""

from __future__ import annotations

import pytest

from dsh_retention import (
    HeadTailLimit,
    Omitted,
    RetentionNotice,
    describe_omitted,
    format_retention_notice,
)


@pytest.mark.parametrize(
    ("omitted", "unit", "expected"),
    [
        (Omitted.exact(3), "items", "Omitted 3 items."),
        (Omitted.exact(12), "bytes", "Omitted 12 bytes."),
        (Omitted.unknown(), "lines", "More lines were omitted."),
        (Omitted.none(), "chars", ""),
    ],
)
def test_describe_omitted(omitted: Omitted, unit: str, expected: str) -> None:
    assert describe_omitted(omitted, unit) == expected  # type: ignore[arg-type]


def test_describe_omitted_rejects_unknown_unit() -> None:
    with pytest.raises(ValueError, match="unit must be one of items, bytes, chars, lines, not 'byte'"):
        describe_omitted(Omitted.exact(1), "byte")  # type: ignore[arg-type]


def _search_notice(omitted: Omitted) -> RetentionNotice:
    return RetentionNotice(scope="search", strategy="head", unit="items", limit=100, kept=100, omitted=omitted)


def _narrow(notice: RetentionNotice) -> str:
    return f"Results capped at {notice.limit}. Narrow the pattern, path, or include to see more."


def test_notice_joins_omission_and_recovery() -> None:
    assert format_retention_notice(_search_notice(Omitted.exact(25)), _narrow) == (
        "Omitted 25 items. Results capped at 100. Narrow the pattern, path, or include to see more."
    )


def test_notice_without_omission_is_only_the_recovery() -> None:
    assert format_retention_notice(_search_notice(Omitted.none()), _narrow) == (
        "Results capped at 100. Narrow the pattern, path, or include to see more."
    )


def test_notice_with_empty_recovery_is_only_the_omission() -> None:
    assert format_retention_notice(_search_notice(Omitted.exact(2)), lambda _notice: "") == "Omitted 2 items."


def test_notice_quotes_a_head_tail_limit() -> None:
    notice = RetentionNotice(
        scope="output",
        strategy="headTail",
        unit="bytes",
        limit=HeadTailLimit(head=2000, tail=2000),
        kept=4000,
        omitted=Omitted.exact(500),
    )

    def kept_ends(notice: RetentionNotice) -> str:
        assert isinstance(notice.limit, HeadTailLimit)
        return f"Kept {notice.limit.head}B head + {notice.limit.tail}B tail."

    assert format_retention_notice(notice, kept_ends) == "Omitted 500 bytes. Kept 2000B head + 2000B tail."


@pytest.mark.parametrize(
    ("kind", "count"),
    [("exact", -1), ("exact", True), ("exact", 1.0), ("none", 3), ("unknown", 1), ("some", 0)],
)
def test_omitted_rejects_inconsistent_values(kind: str, count: object) -> None:
    with pytest.raises(ValueError):
        Omitted(kind, count)  # type: ignore[arg-type]
