"""Session titles: normalisation, the fallback title, and the default title provider.

Titles are log-only `session/title` events; the latest one wins. The default provider titles a
session from its first direct user message (the envelope's display content, so a baked
snapshot never becomes a title); the session registry writes that title when it flushes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from dsh_host.session.events import display_prompt_content, text_of
from dsh_host.text import JS_WHITESPACE

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue
    from dsh_host.session.events import Event

# The reference's defaults: every fallback title in the reference implementation's logs is
# the first 5 words of its prompt capped at 40 UTF-8 bytes.
FALLBACK_MAX_WORDS = 5
FALLBACK_MAX_BYTES = 40

_OSC = re.compile(r"(?:\x1b\]|\x9d).*?(?:\x07|\x1b\\|$)", re.DOTALL)
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]")
_ESC2 = re.compile(r"\x1b[@-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_INVISIBLE = re.compile(r"[\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
# JavaScript's \s, which the reference collapses (Python's \s differs at \x1c-\x1f, \x85, \ufeff).
_JS_SPACE_RUN = re.compile(f"[{re.escape(JS_WHITESPACE)}]+")


def _check_limit(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _clean(text: str) -> str:
    text = _OSC.sub("", text)
    text = _CSI.sub("", text)
    text = _ESC2.sub("", text)
    text = _CONTROLS.sub("", text)
    text = _INVISIBLE.sub("", text)
    return _JS_SPACE_RUN.sub(" ", text).strip(" ")


def _truncate_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text.rstrip(" ")
    # Back up to the start of the code point the cap falls into (a continuation byte is 10xxxxxx).
    end = max_bytes
    while end > 0 and (encoded[end] & 0xC0) == 0x80:
        end -= 1
    return encoded[:end].decode("utf-8", "surrogatepass").rstrip(" ")


def normalize_title(text: str, max_bytes: int) -> str:
    """Strip terminal sequences, controls and invisible characters; collapse spaces; cap bytes."""
    _check_limit("maxBytes", max_bytes)
    return _truncate_utf8(_clean(text), max_bytes)


def fallback_title(text: str, max_words: int = FALLBACK_MAX_WORDS, max_bytes: int = FALLBACK_MAX_BYTES) -> str:
    """The first `max_words` words of the cleaned text, capped at `max_bytes` UTF-8 bytes."""
    _check_limit("maxWords", max_words)
    _check_limit("maxBytes", max_bytes)
    words = _clean(text).split(" ")
    return _truncate_utf8(" ".join(words[:max_words]), max_bytes)


def eligible_title_text(event: Event) -> str | None:
    """The text a title may come from: direct human `user/message` text, else None."""
    if event.type != "user/message":
        return None
    data = event.data
    source = data.get("source")
    if not isinstance(source, Mapping) or source.get("kind") != "user":
        return None
    text = text_of(display_prompt_content(data))
    return text if _clean(text) else None


def latest_title(events: Sequence[Event]) -> Json | None:
    """The latest `session/title` of a log as `{title, messageSeqs, source, eventSeq, updatedAt}`."""
    for event in reversed(events):
        if event.type == "session/title":
            data = event.data
            return {
                "title": data.get("title"),
                "messageSeqs": data.get("messageSeqs"),
                "source": data.get("source"),
                "eventSeq": event.seq,
                "updatedAt": event.time,
            }
    return None


def fallback_title_data(events: Iterable[Event]) -> dict[str, JsonValue] | None:
    """The `session/title` data for the first eligible prompt among `events`, if any."""
    for event in events:
        text = eligible_title_text(event)
        if text is None:
            continue
        title = fallback_title(text)
        if title:
            return {"title": title, "messageSeqs": [event.seq], "source": {"kind": "fallback"}}
    return None
