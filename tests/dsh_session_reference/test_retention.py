"""Per-source retention: golden cuts, and equality with the naive re-serializing algorithm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_retention import utf8_length
from dsh_session_reference import ErrorCode, SessionReferenceError
from dsh_session_reference.jsjson import tag_safe_json
from dsh_session_reference.projection import ProjectedMessage, ProjectedSource, project_surface
from dsh_session_reference.retention import (
    ConversationEntry,
    RetainedSource,
    RetentionStats,
    TruncatedText,
    retain_source,
    source_data,
    truncate_with_notice,
)
from tests.dsh_session_reference.conftest import COMPACT, FIXTURE_SURFACE_SEQS, conversation

if TYPE_CHECKING:
    from dsh_host.testing import LogBuilder

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
WIDE = "界"


def serialized(source: RetainedSource) -> str:
    return tag_safe_json(source.to_data())


def stats_dict(stats: RetentionStats) -> dict[str, Any]:
    return {
        "compacted": stats.compacted,
        "originalMessages": stats.original_messages,
        "retainedMessages": stats.retained_messages,
        "omittedMessages": stats.omitted_messages,
        "omittedBytes": stats.omitted_bytes,
        "truncated": stats.truncated,
    }


def test_truncate_keeps_a_head_and_a_tail_and_counts_the_omitted_bytes() -> None:
    result = truncate_with_notice(ALPHABET * 4, 60)
    assert result == TruncatedText("abcdefghijklmn" + "nopqrstuvwxyz" + "\n[… omitted 77 UTF-8 bytes …]", 77)
    assert utf8_length(result.text) == 60


def test_truncate_to_nothing_when_even_the_notice_does_not_fit() -> None:
    assert truncate_with_notice("abcdefghij", 5) == TruncatedText("", 10)


def test_truncate_keeps_text_that_fits() -> None:
    assert truncate_with_notice("abc", 3) == TruncatedText("abc", 0)


def test_truncate_never_splits_a_character() -> None:
    result = truncate_with_notice(WIDE * 100, 80)
    kept = result.text.split("\n[…")[0]
    assert set(kept) == {WIDE}
    assert result.omitted == 300 - 3 * len(kept)
    assert utf8_length(result.text) <= 80


def p5_source(log_builder: type[LogBuilder]) -> ProjectedSource:
    log = [*conversation(), log_builder.assistant(14, "latest-" + WIDE * 400)]
    surface = log_builder.surface(log, (*FIXTURE_SURFACE_SEQS, 14))
    return project_surface(log_builder.header("source", cwd=None), 14, surface)


def test_the_checkpoint_is_kept_old_messages_dropped_and_the_newest_truncated(log_builder: type[LogBuilder]) -> None:
    retained = retain_source(p5_source(log_builder), "source", 360)
    text = serialized(retained)
    assert text == (
        '{"sessionId":"source","label":"source","cwd":null,"capturedThroughSeq":14,"conversation":['
        '{"role":"user","text":"\\u003ccompacted-summary>checkpoint\\u003c/compacted-summary>"},'
        '{"role":"assistant","text":"latest-' + WIDE * 36 + '\\n[… omitted 1092 UTF-8 bytes …]"}]}'
    )
    assert utf8_length(text) == 358
    assert stats_dict(retained.stats) == {
        "compacted": True,
        "originalMessages": 5,
        "retainedMessages": 2,
        "omittedMessages": 3,
        "omittedBytes": 1128,
        "truncated": True,
    }


@pytest.mark.parametrize(
    ("session_id", "size", "wide_count", "omitted"),
    [("one", 358, 58, 1026), ("two", 358, 58, 1026), ("three", 360, 56, 1032)],
)
def test_each_source_fits_its_own_budget(
    log_builder: type[LogBuilder], session_id: str, size: int, wide_count: int, omitted: int
) -> None:
    events = [
        log_builder.user(0, f"{session_id}-" + WIDE * 400, source=COMPACT),
        log_builder.user(1, f"{session_id}-tail"),
    ]
    retained = retain_source(project_surface(log_builder.header(session_id, cwd=None), 1, events), session_id, 360)
    assert utf8_length(serialized(retained)) == size
    assert retained.conversation == (
        ConversationEntry("user", f"{session_id}-" + WIDE * wide_count + f"\n[… omitted {omitted} UTF-8 bytes …]"),
        ConversationEntry("user", f"{session_id}-tail"),
    )
    assert stats_dict(retained.stats) == {
        "compacted": True,
        "originalMessages": 2,
        "retainedMessages": 2,
        "omittedMessages": 0,
        "omittedBytes": omitted,
        "truncated": True,
    }


def test_fixed_fields_that_cannot_fit_exceed_the_budget(log_builder: type[LogBuilder]) -> None:
    empty = project_surface(log_builder.header("source", cwd=None), None, [])
    assert utf8_length(tag_safe_json(source_data("source", "source", None, None, ()))) > 16
    with pytest.raises(SessionReferenceError) as caught:
        retain_source(empty, "source", 16)
    assert caught.value.code == ErrorCode.BUDGET_EXCEEDED
    assert caught.value.message == "referenced session snapshot cannot fit the configured byte budget"


def test_nothing_is_cut_when_the_object_fits(log_builder: type[LogBuilder]) -> None:
    source = project_surface(
        log_builder.header("s", cwd="/c"), 3, [log_builder.user(0, "hi"), log_builder.assistant(1, "hello")]
    )
    retained = retain_source(source, "label", 65536)
    assert retained.to_data() == {
        "sessionId": "s",
        "label": "label",
        "cwd": "/c",
        "capturedThroughSeq": 3,
        "conversation": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}],
    }
    assert not retained.stats.truncated


def test_checkpoints_and_the_newest_message_are_never_dropped() -> None:
    messages = (
        ProjectedMessage("user", "old"),
        ProjectedMessage("user", "summary " * 10, checkpoint=True),
        ProjectedMessage("assistant", "middle"),
        ProjectedMessage("user", "newest " * 10),
    )
    source = ProjectedSource.of("s", None, 4, messages)
    retained = retain_source(source, "s", 250)
    assert [entry.text[:7] for entry in retained.conversation] == ["summary", "newest "]
    assert retained.stats.omitted_messages == 2
    assert utf8_length(serialized(retained)) <= 250


def test_escaping_counts_toward_the_budget() -> None:
    source = ProjectedSource.of("s", None, 0, (ProjectedMessage("user", "<" * 40),))
    fixed = utf8_length(tag_safe_json(source_data("s", "s", None, 0, ())))
    item_overhead = len('{"role":"user","text":""}')
    fits = retain_source(source, "s", fixed + item_overhead + 240)
    assert not fits.stats.truncated
    cut = retain_source(source, "s", fixed + item_overhead + 239)
    assert cut.stats.truncated


def naive_retain(source: ProjectedSource, label: str, max_bytes: int) -> tuple[dict[str, Any], RetentionStats]:
    """The reference algorithm, re-serializing the whole object at every step."""
    items = [
        {"role": m.role, "original": m.text, "text": m.text, "checkpoint": m.checkpoint, "omitted": 0}
        for m in source.messages
    ]

    def data() -> dict[str, Any]:
        entries = [ConversationEntry(item["role"], item["text"]) for item in items]
        return source_data(source.session_id, label, source.cwd, source.captured_through_seq, entries)

    def size() -> int:
        return utf8_length(tag_safe_json(data()))

    omitted_messages = dropped_bytes = 0
    while size() > max_bytes:
        newest = len(items) - 1
        index = next((i for i, item in enumerate(items) if not item["checkpoint"] and i != newest), None)
        if index is None:
            break
        omitted_messages += 1
        dropped_bytes += utf8_length(items.pop(index)["original"])
    while size() > max_bytes:
        if not items:
            raise SessionReferenceError(ErrorCode.BUDGET_EXCEEDED, "cannot fit")
        largest = max(items, key=lambda item: utf8_length(item["text"]))
        largest_bytes = utf8_length(largest["text"])
        if largest_bytes == 0:
            raise SessionReferenceError(ErrorCode.BUDGET_EXCEEDED, "cannot fit")
        shortened = truncate_with_notice(largest["original"], max(0, largest_bytes - (size() - max_bytes)))
        if shortened.text == largest["text"]:
            raise SessionReferenceError(ErrorCode.BUDGET_EXCEEDED, "cannot fit")
        largest["text"] = shortened.text
        largest["omitted"] = shortened.omitted
    stats = RetentionStats(
        compacted=any(m.checkpoint for m in source.messages),
        original_messages=len(source.messages),
        retained_messages=len(items),
        omitted_messages=omitted_messages,
        omitted_bytes=dropped_bytes + sum(item["omitted"] for item in items),
    )
    return data(), stats


# Every class of character JSON escapes differently: quote and backslash, the controls with a
# letter escape and those spelled \u00XX (bounds included), DEL (not escaped), `<` (tag-safe),
# multi-byte and astral characters, a lone surrogate, U+2028.
CHARS = st.sampled_from('ab<>"\\\n\t\r\b\f\x00\x01\x1f\x7f/界😀\ufeff\ud800\u2028')
# Repeated units give texts long enough to be truncated rather than emptied.
TEXTS = st.text(CHARS, max_size=20) | st.builds(
    lambda unit, times: unit * times, st.text(CHARS, min_size=1, max_size=12), st.integers(2, 80)
)
MESSAGES = st.lists(
    st.builds(ProjectedMessage, st.sampled_from(["user", "assistant"]), TEXTS, st.booleans()), max_size=12
)
SOURCES = st.builds(
    ProjectedSource.of,
    st.text(max_size=8),
    st.none() | st.text(max_size=8),
    st.none() | st.integers(0, 10_000),
    MESSAGES.map(tuple),
)


def outcome(run: Any, *args: Any) -> Any:
    try:
        return run(*args)
    except SessionReferenceError as error:
        assert error.code == ErrorCode.BUDGET_EXCEEDED
        return "cannot fit"


@settings(max_examples=400)
@given(SOURCES, st.text(max_size=8), st.integers(60, 1500))
def test_incremental_retention_equals_the_naive_algorithm(source: ProjectedSource, label: str, max_bytes: int) -> None:
    expected = outcome(naive_retain, source, label, max_bytes)
    actual = outcome(retain_source, source, label, max_bytes)
    if expected == "cannot fit":
        assert actual == "cannot fit"
    else:
        assert (actual.to_data(), actual.stats) == expected


@given(SOURCES, st.text(max_size=8), st.integers(60, 1500))
def test_every_result_fits_its_budget(source: ProjectedSource, label: str, max_bytes: int) -> None:
    result = outcome(retain_source, source, label, max_bytes)
    if result != "cannot fit":
        assert utf8_length(serialized(result)) <= max_bytes
        assert result.stats.retained_messages == len(result.conversation)
        last = len(source.messages) - 1
        survivors = [m for i, m in enumerate(source.messages) if m.checkpoint or i == last]
        assert result.stats.retained_messages >= len(survivors)
