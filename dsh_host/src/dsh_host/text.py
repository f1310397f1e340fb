"""Text helpers: JavaScript's string conventions, and text clipped for one line.

Public namespace `dsh_host.text`. The logs, mentions and titles dsh interoperates with were
written by JavaScript, so a few of its rules are part of the contract: which characters count
as whitespace, how `trim` trims, how `Date.toISOString` writes a time, how a template string
renders a JSON scalar, and how strings of UTF-16 code units map onto Python's.

A JavaScript string is any sequence of UTF-16 code units, so it may hold a lone surrogate; it
reaches Python (through `json.loads` of a `\\ud800` escape) as a surrogate code point, which
strict UTF-8 cannot encode. A surrogate pair spelled as two code points is, to JavaScript, the
one character it encodes.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache

__all__ = [
    "JS_WHITESPACE",
    "escape_lone_surrogates",
    "has_surrogate",
    "iso_utc",
    "join_surrogate_pairs",
    "js_string",
    "js_trim",
    "shorten_text",
]

JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""The characters JavaScript's `\\s` and `String.prototype.trim` treat as whitespace.

Python's `str.isspace` differs: it also covers `\\x1c`-`\\x1f` and `\\x85` but not U+FEFF.
"""

_EPOCH_DAY = date(1970, 1, 1).toordinal()
_DAY_MS = 86_400_000


def js_trim(text: str) -> str:
    """`text` trimmed exactly as JavaScript's `String.prototype.trim` would."""
    return text.strip(JS_WHITESPACE)


def iso_utc(epoch_ms: float) -> str:
    """Epoch milliseconds as JavaScript's `Date.toISOString` writes them: `1970-01-01T00:00:00.001Z`.

    Years 1 to 9999 (`ValueError` outside them).
    """
    # JavaScript truncates a fractional time value toward zero. The time of day is plain
    # arithmetic and the date is looked up per day: a listing formats many times of few days,
    # and building a datetime for each cost several times as much.
    days, in_day = divmod(int(epoch_ms), _DAY_MS)
    seconds, milliseconds = divmod(in_day, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{_iso_day(days)}T{hour:02d}:{minute:02d}:{second:02d}.{milliseconds:03d}Z"


@lru_cache(maxsize=4096)
def _iso_day(days: int) -> str:
    """The date `days` after 1970-01-01, as `YYYY-MM-DD`."""
    return date.fromordinal(_EPOCH_DAY + days).isoformat()


def js_string(value: object) -> str:
    """A JSON scalar as JavaScript's `String(value)` (and a template string) renders it.

    `null`, `true`/`false`, and an integral number without `.0`; the reference's messages
    interpolate log values this way, and messages that quote them must match.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# JavaScript reads a high surrogate followed by a low one as one character; any other
# surrogate is lone.
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE_OR_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate code point (lone, or half of a pair)."""
    # A surrogate is exactly what strict UTF-8 cannot encode; the C encoder finds it faster
    # than a regex scan.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def join_surrogate_pairs(text: str) -> str:
    """Write each high + low surrogate pair of `text` as the one character it encodes.

    Both spellings are the same JavaScript string; normalizing makes UTF-8 lengths and
    truncation treat the pair as one four-byte character, as JS does.
    """
    if text.isascii() or not has_surrogate(text):
        return text
    return _SURROGATE_PAIR.sub(_join_pair, text)


def escape_lone_surrogates(text: str) -> str:
    """`text` as valid Unicode: pairs joined, each lone surrogate written as `\\udXXX` (lowercase).

    That is how `JSON.stringify` writes a lone surrogate, so inside JSON text the result is the
    reference's spelling of the same value; outside JSON it is a visible, inert stand-in.
    """
    if text.isascii() or not has_surrogate(text):
        return text
    return _SURROGATE_OR_PAIR.sub(_join_or_escape, text)


def _join_pair(match: re.Match[str]) -> str:
    high, low = match.group()  # type: ignore[str-unpack]  # a surrogate pair: two characters
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def _join_or_escape(match: re.Match[str]) -> str:
    if len(match.group()) == 2:
        return _join_pair(match)
    return f"\\u{ord(match.group()):04x}"


def shorten_text(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs as one space), clipped to `limit` characters with `…`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
