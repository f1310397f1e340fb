"""UTF-8 as JavaScript's TextEncoder and TextDecoder produce and consume it.

The reference implementation runs in JavaScript, so byte counts and decoded text must match what
its encoder and decoder do, not what Python's codecs do by default.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
_BOM = "\ufeff"


def js_utf8_encode(text: str) -> bytes:
    """Encode `text` as UTF-8 the way JavaScript's `TextEncoder` does.

    Each surrogate code point (which Python allows in a str, and `json.loads` can produce)
    becomes U+FFFD, `EF BF BD`, where Python's own encoder would raise.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


def utf8_length(text: str) -> int:
    """Number of bytes `js_utf8_encode(text)` returns, without building the replaced text."""
    if text.isascii():
        return len(text)
    # surrogatepass writes each surrogate as three bytes: the width of the U+FFFD that JS emits.
    return len(text.encode("utf-8", "surrogatepass"))


def js_utf8_decode(data: bytes | bytearray | memoryview) -> str:
    """Decode UTF-8 the way JavaScript's `TextDecoder` does with default settings.

    Malformed sequences become U+FFFD (CPython replaces maximal invalid subparts, as the WHATWG
    decoder does) and one leading byte order mark is removed per call.
    """
    text = str(data, "utf-8", "replace")
    return text[1:] if text.startswith(_BOM) else text


def _declared_length(lead: int) -> int:
    """Sequence length a lead byte announces; 0 for bytes that cannot start one.

    Deliberately lax, as the reference is: continuation bytes fall in the two-byte band, and
    C0, C1 and F5-F7 count as leads.
    """
    if lead < 0x80:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    if lead < 0xF8:
        return 4
    return 0


def trim_trailing_partial(data: bytes) -> bytes:
    """Drop an incomplete UTF-8 sequence from the end of `data`, if one is there."""
    end = len(data)
    i = end - 1
    while i >= 0 and data[i] & 0xC0 == 0x80 and end - i <= 3:
        i -= 1
    if i < 0:
        return data
    declared = _declared_length(data[i])
    if declared and end - i < declared:
        return data[:i]
    return data


def trim_leading_continuations(data: bytes) -> bytes:
    """Drop every continuation byte at the start of `data`: they belong to a cut code point."""
    return data.lstrip(_CONTINUATION_BYTES)
