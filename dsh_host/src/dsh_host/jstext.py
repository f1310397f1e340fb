"""JavaScript's string conventions that the reference's formats depend on.

The logs, mentions and titles we interoperate with were written by JavaScript, so a few of its
rules are part of the contract: which characters count as whitespace, how `trim` trims, and how
`Date.toISOString` writes a time, and how a template string renders a JSON scalar.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""The characters JavaScript's `\\s` and `String.prototype.trim` treat as whitespace.

Python's `str.isspace` differs: it also covers `\\x1c`-`\\x1f` and `\\x85` but not U+FEFF.
"""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def js_trim(text: str) -> str:
    """`text` trimmed exactly as JavaScript's `String.prototype.trim` would."""
    return text.strip(JS_WHITESPACE)


def iso_utc(epoch_ms: float) -> str:
    """Epoch milliseconds as JavaScript's `Date.toISOString` writes them: `1970-01-01T00:00:00.001Z`."""
    # JavaScript truncates a fractional time value toward zero.
    moment = _EPOCH + timedelta(milliseconds=int(epoch_ms))
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def js_string(value: Any) -> str:
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
