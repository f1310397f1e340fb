"""Property tests: what head/tail retention keeps, drops and counts, for any text and budgets."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dsh_retention import (
    Omitted,
    RetainedText,
    TextRetainer,
    js_utf8_decode,
    js_utf8_encode,
    retain_head_tail,
    utf8_length,
)

# Weighted towards the interesting cases: multibyte code points of every width and surrogates.
CHARACTERS = st.one_of(
    st.sampled_from(["a", "é", "€", "😀", "\ud800", "\udfff", "\ufffd"]),
    st.characters(exclude_categories=()),
)
TEXTS = st.text(CHARACTERS, max_size=40)
BUDGETS = st.integers(min_value=0, max_value=48)


def _split_kept(result: RetainedText, data: bytes, head: int, tail: int) -> tuple[bytes, bytes]:
    """Split the kept bytes into a prefix of `data` within `head` and a suffix within `tail`."""
    kept = js_utf8_encode(result.text)
    for cut in range(len(kept) + 1):
        prefix, suffix = kept[:cut], kept[cut:]
        if len(prefix) <= head and len(suffix) <= tail and data.startswith(prefix) and data.endswith(suffix):
            return prefix, suffix
    raise AssertionError(f"{kept!r} is not a prefix of {data!r} within {head} plus a suffix within {tail}")


@given(TEXTS, BUDGETS, BUDGETS)
def test_kept_bytes_are_a_prefix_and_a_suffix_within_budget(text: str, head: int, tail: int) -> None:
    # Without a BOM, decoding each kept side gives back exactly its bytes.
    assume("\ufeff" not in text)
    data = js_utf8_encode(text)

    result = retain_head_tail(text, head, tail)

    if result.omitted == Omitted.none():
        assert len(data) <= head + tail
        assert result.text == js_utf8_decode(data)
        return
    prefix, suffix = _split_kept(result, data, head, tail)
    assert len(prefix) + len(suffix) + result.omitted.count == len(data)
    assert result.truncated
    # A cut never leaves a partial code point behind, so it cannot add U+FFFD.
    assert result.text.count("\ufffd") <= js_utf8_decode(data).count("\ufffd")


@given(TEXTS, BUDGETS, BUDGETS)
def test_result_is_valid_text_and_counts_are_bounded(text: str, head: int, tail: int) -> None:
    total = utf8_length(text)

    result = retain_head_tail(text, head, tail)

    result.text.encode("utf-8")  # no surrogates survive
    assert result.truncated is (total > head + tail)
    if result.truncated:
        # A cut loses at most three extra bytes at each end.
        assert total - head - tail <= result.omitted.count <= total - head - tail + 6
        assert result.omitted.count <= total


@given(TEXTS)
def test_utf8_length_is_the_js_encoded_length(text: str) -> None:
    assert utf8_length(text) == len(js_utf8_encode(text))


@st.composite
def chunked(draw: st.DrawFn) -> tuple[str, list[str | bytes]]:
    """A text and a way to push it: as str pieces or as bytes split anywhere, even mid code point."""
    text = draw(TEXTS)
    as_bytes = draw(st.booleans())
    whole: str | bytes = js_utf8_encode(text) if as_bytes else text
    cuts = sorted(draw(st.lists(st.integers(0, len(whole)), max_size=6)))
    bounds = [0, *cuts, len(whole)]
    return text, [whole[start:end] for start, end in pairwise(bounds)]


@given(chunked(), BUDGETS, BUDGETS)
def test_streaming_any_chunking_equals_one_shot(pushed: tuple[str, list[str | bytes]], head: int, tail: int) -> None:
    text, chunks = pushed
    expected = retain_head_tail(text, head, tail)
    retainer = TextRetainer.head_tail(head, tail)

    decisions = [retainer.push(chunk) for chunk in chunks]

    assert retainer.finish() == expected
    if decisions:
        assert decisions[-1].truncated is expected.truncated


@given(chunked(), BUDGETS)
def test_head_and_tail_are_head_tail_with_one_side_zero(pushed: tuple[str, list[str | bytes]], size: int) -> None:
    text, chunks = pushed
    head, tail = TextRetainer.head(size), TextRetainer.tail(size)
    for chunk in chunks:
        head.push(chunk)
        tail.push(chunk)

    assert head.finish() == retain_head_tail(text, size, 0)
    assert tail.finish() == retain_head_tail(text, 0, size)


@given(st.lists(st.binary(max_size=12), max_size=6), BUDGETS, BUDGETS)
def test_push_decisions_follow_the_budget(chunks: list[bytes], head: int, tail: int) -> None:
    retainer = TextRetainer.head_tail(head, tail)
    total = 0
    for chunk in chunks:
        omitted_before = max(0, total - head - tail)
        total += len(chunk)
        omitted_after = max(0, total - head - tail)

        decision = retainer.push(chunk)

        assert decision.kept is (omitted_after == omitted_before)
        assert decision.truncated is (omitted_after > 0)


# Texts of 2,000 to 4,000 characters, built from random ends around a repeated random middle: drawn
# character by character they exceed what Hypothesis generates per example.
LARGE_TEXTS = st.builds(
    lambda start, middle, times, end: start + middle * times + end,
    st.text(CHARACTERS, max_size=300),
    st.text(CHARACTERS, min_size=20, max_size=60),
    st.integers(100, 160),
    st.text(CHARACTERS, max_size=300),
)


@settings(max_examples=50)
@given(LARGE_TEXTS, st.integers(0, 3000), st.integers(0, 3000))
def test_large_texts_keep_their_ends(text: str, head: int, tail: int) -> None:
    retainer = TextRetainer.head_tail(head, tail)
    for start in range(0, len(text), 97):
        retainer.push(text[start : start + 97])

    assert retainer.finish() == retain_head_tail(text, head, tail)
