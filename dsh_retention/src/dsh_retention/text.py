"""Head, tail and head+tail retention of UTF-8 text, measured in bytes."""

from __future__ import annotations

from .budget import validate_budget
from .results import Omitted, PushDecision, RetainedText
from .utf8 import (
    js_utf8_decode,
    js_utf8_encode,
    trim_leading_continuations,
    trim_trailing_partial,
    utf8_length,
)


class TextRetainer:
    """Keeps the first `head_bytes` and the last `tail_bytes` bytes of a stream of text.

    Memory stays bounded by the two budgets however much is pushed. Build one with
    `TextRetainer.head`, `TextRetainer.tail` or `TextRetainer.head_tail`; push `str` chunks
    (encoded as JavaScript would) or raw bytes, then call `finish`.
    """

    def __init__(self, *, head_bytes: int, tail_bytes: int) -> None:
        self._head_cap = validate_budget("headBytes", head_bytes)
        self._tail_cap = validate_budget("tailBytes", tail_bytes)
        self._prefix = bytearray()
        # Only bytes past the prefix enter the window, so prefix and suffix never overlap.
        self._window = bytearray()
        self._total = 0

    @classmethod
    def head(cls, max_bytes: int) -> TextRetainer:
        """Keep the first `max_bytes` bytes."""
        return cls(head_bytes=validate_budget("maxBytes", max_bytes), tail_bytes=0)

    @classmethod
    def tail(cls, max_bytes: int) -> TextRetainer:
        """Keep the last `max_bytes` bytes."""
        return cls(head_bytes=0, tail_bytes=validate_budget("maxBytes", max_bytes))

    @classmethod
    def head_tail(cls, head_bytes: int, tail_bytes: int) -> TextRetainer:
        """Keep the first `head_bytes` and the last `tail_bytes` bytes."""
        return cls(head_bytes=head_bytes, tail_bytes=tail_bytes)

    def push(self, chunk: str | bytes | bytearray | memoryview) -> PushDecision:
        """Add a chunk; report whether it fit the budgets and whether anything is omitted yet.

        The decision is about budgets only: bytes `finish` later trims at a code point cut are
        not reflected here.
        """
        if isinstance(chunk, str):
            data = memoryview(js_utf8_encode(chunk))
        elif isinstance(chunk, (bytes, bytearray, memoryview)):
            data = memoryview(chunk).cast("B")
        else:
            raise TypeError(f"chunk must be str or bytes, not {type(chunk).__name__}")
        before = self._omitted_at(self._total)
        self._total += len(data)
        room = self._head_cap - len(self._prefix)
        if room > 0:
            self._prefix += data[:room]
            data = data[room:]
        if self._tail_cap and data:
            # Only the last tail_cap bytes of a big chunk can survive, so copy no more.
            self._window += data[-self._tail_cap :]
            excess = len(self._window) - self._tail_cap
            if excess > 0:
                del self._window[:excess]
        after = self._omitted_at(self._total)
        return PushDecision(kept=after == before, truncated=after > 0)

    def finish(self) -> RetainedText:
        """Return the retained text and the exact count of bytes left out of it."""
        return _assemble(bytes(self._prefix), bytes(self._window), self._total)

    def _omitted_at(self, total: int) -> int:
        return max(0, total - self._head_cap - self._tail_cap)


def retain_head_tail(text: str, head_bytes: int, tail_bytes: int) -> RetainedText:
    """One-shot `TextRetainer.head_tail(head_bytes, tail_bytes)` over the whole of `text`.

    Equal to pushing `text` and finishing, but it encodes only the two ends of `text`, so a
    large text costs little more than measuring its UTF-8 length.
    """
    head = validate_budget("headBytes", head_bytes)
    tail = validate_budget("tailBytes", tail_bytes)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    total = utf8_length(text)
    if total <= head + tail:
        return _assemble(js_utf8_encode(text), b"", total)
    # Every code point takes at least one byte, so `head` code points cover `head` bytes.
    prefix = js_utf8_encode(text[:head])[:head]
    suffix = js_utf8_encode(text[-tail:])[-tail:] if tail else b""
    return _assemble(prefix, suffix, total)


def _assemble(prefix: bytes, suffix: bytes, total: int) -> RetainedText:
    """Turn the kept first and last bytes of a `total`-byte text into the retained result."""
    if len(prefix) + len(suffix) == total:
        # No gap: the head/tail split is artificial and may fall inside a code point.
        return RetainedText(js_utf8_decode(prefix + suffix), truncated=False, omitted=Omitted.none())
    # A real gap: never rebuild a code point across it, and count trimmed bytes as omitted.
    kept_prefix = trim_trailing_partial(prefix)
    kept_suffix = trim_leading_continuations(suffix)
    omitted = total - len(kept_prefix) - len(kept_suffix)
    return RetainedText(
        js_utf8_decode(kept_prefix) + js_utf8_decode(kept_suffix),
        truncated=omitted > 0,
        omitted=Omitted.exact(omitted),
    )
