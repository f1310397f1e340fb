"""JavaScript UTF-8 semantics: lone surrogates and the byte order mark."""

from __future__ import annotations

import pytest

from dsh_retention import (
    Omitted,
    TextRetainer,
    js_utf8_decode,
    js_utf8_encode,
    retain_head_tail,
    utf8_length,
)

REPLACEMENT = b"\xef\xbf\xbd"
BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("", b""),
        ("a€😀", b"a\xe2\x82\xac\xf0\x9f\x98\x80"),
        ("\ud800", REPLACEMENT),
        ("a\udc00b", b"a" + REPLACEMENT + b"b"),
        # Python keeps a high/low pair as two code points; each is lone and replaced on its own.
        ("\ud83d\ude00", REPLACEMENT * 2),
    ],
)
def test_encode_replaces_each_surrogate(text: str, encoded: bytes) -> None:
    assert js_utf8_encode(text) == encoded
    assert utf8_length(text) == len(encoded)


def test_decode_removes_one_leading_bom_per_call() -> None:
    assert js_utf8_decode(BOM + b"hi") == "hi"
    assert js_utf8_decode(BOM + BOM + b"hi") == "\ufeffhi"
    assert js_utf8_decode(b"hi" + BOM) == "hi\ufeff"


def test_decode_replaces_malformed_sequences() -> None:
    assert js_utf8_decode(b"a\xe2\x82") == "a\ufffd"
    assert js_utf8_decode(bytearray(b"\xed\xa0\x80")) == "\ufffd" * 3


def test_lone_surrogates_count_three_bytes_and_read_back_as_replacement() -> None:
    result = retain_head_tail("ab\ud800cd", 5, 0)

    assert result.text == "ab\ufffd"
    assert result.omitted == Omitted.exact(2)


def test_bom_starting_the_tail_is_dropped_but_counts_as_retained() -> None:
    text = "abcdef\ufeffxy"  # 6 + 3 + 2 = 11 bytes

    result = retain_head_tail(text, 2, 5)

    assert result.text == "abxy"
    assert result.omitted == Omitted.exact(4)


def test_bom_starting_the_head_is_dropped_but_counts_as_retained() -> None:
    retainer = TextRetainer.head(4)
    retainer.push(BOM + b"abc")

    result = retainer.finish()

    assert result.text == "a"
    assert result.omitted == Omitted.exact(2)


def test_without_a_gap_one_decode_drops_only_the_first_bom() -> None:
    retainer = TextRetainer.head_tail(3, 3)
    retainer.push(BOM)
    retainer.push(BOM)

    assert retainer.finish().text == "\ufeff"
