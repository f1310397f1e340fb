"""Control-character and lone-surrogate escaping for the terminal, and JavaScript trimming."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from dsh_host.terminal_text import display_inline_text, display_text, inert_json
from dsh_host.text import JS_WHITESPACE, join_surrogate_pairs, js_trim

PROBE = "\x1b]2;title\x07\t\x7f\x9b31m"
ESCAPED_PROBE = r"\x1b]2;title\x07\x09\x7f\x9b31m"
UNSAFE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
# The whole of Unicode, lone surrogates included (plain `st.text()` leaves them out).
ANY_TEXT = st.text(st.one_of(st.sampled_from("\ud800\udfff\ud83d\ude00\x9b"), st.characters(exclude_categories=())))


def test_the_probe_becomes_inert_text():
    assert display_text(PROBE) == ESCAPED_PROBE
    assert display_inline_text(PROBE) == ESCAPED_PROBE


def test_each_escaped_class_uses_two_lowercase_hex_digits():
    assert display_text("\x00\x01\r\x1f\x7f\x80\x85\x9f") == r"\x00\x01\x0d\x1f\x7f\x80\x85\x9f"
    assert display_text("\x1b") == r"\x1b"


def test_line_feed_is_structural_except_inline():
    assert display_text("a\nb") == "a\nb"
    assert display_inline_text("a\nb\r\n") == r"a\x0ab\x0d\x0a"


def test_other_characters_pass_through():
    text = "back\\slash \\x1b nbsp\u00a0 bidi\u202e ls\u2028 ümlaut 引号 \ufeff"
    assert display_text(text) == text


def test_a_lone_surrogate_is_shown_as_its_escape_and_a_split_pair_as_its_character():
    assert display_text("a\ud800b\udfff") == r"a\ud800b\udfff"
    assert display_inline_text("\ud83d\ude00\n\udc00\ud800") == "😀" + r"\x0a\udc00\ud800"


def test_inert_json_writes_a_lone_surrogate_as_json_stringify_does():
    value = {"id": "a\ud800", "pair": "\ud83d\ude00", "c1": "\x9b"}
    line = inert_json(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    assert line == '{"id":"a\\ud800","pair":"😀","c1":"\\u009b"}'


@given(ANY_TEXT)
def test_nothing_unsafe_survives(text):
    shown = display_text(text)
    assert not UNSAFE.search(shown)
    shown.encode("utf-8")  # no lone surrogate is left to fail the terminal's encoder
    assert "\n" not in display_inline_text(text)
    assert shown.count("\n") == text.count("\n")


@given(st.lists(ANY_TEXT, max_size=3))
def test_inert_json_is_valid_utf8_and_the_same_value(texts):
    line = inert_json(json.dumps(texts, ensure_ascii=False))
    line.encode("utf-8")
    assert not UNSAFE.search(line)
    assert json.loads(line) == [join_surrogate_pairs(text) for text in texts]


def test_js_trim_uses_the_javascript_whitespace_set():
    assert js_trim("\ufeff\u3000 hi \t\n\u2028") == "hi"
    # Python's str.strip() would remove these; JavaScript's trim keeps them.
    assert js_trim("\x1chi\x85") == "\x1chi\x85"
    assert js_trim("\x1f") == "\x1f"
    assert set(JS_WHITESPACE) >= {"\u2000", "\u200a", "\u00a0", "\v", "\f"}
    assert "\u200b" not in JS_WHITESPACE
