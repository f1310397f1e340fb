"""Making untrusted text inert before it reaches the terminal.

Session titles, ids, cwds, message and tool text all come from logs or models, so any of them
may carry terminal control sequences (a window-title OSC, a CSI colour change, a bare BEL).
Everything the UI and the command line show passes through `display_text` or
`display_inline_text`, which turn control characters into visible `\\xNN` text instead, and
every JSON line they print through `inert_json`.

Any of them may also be any JavaScript string, so it may hold a lone surrogate, which no
terminal encoding can write (printing it raises `UnicodeEncodeError`). All three helpers write
it as `\\udXXX`: visible and inert in text, and in JSON the escape `JSON.stringify` writes, which
parses back to the same string.
"""

from __future__ import annotations

import re

from dsh_host.text import escape_lone_surrogates

# Every C0 control except LF (which the transcript needs for structure), DEL, and every C1
# control (0x9b alone is a CSI on terminals that honour 8-bit controls).
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def display_text(text: str) -> str:
    """`text` with every control character except LF written as `\\xNN` (lowercase hex), and
    every lone surrogate as `\\udXXX` (a surrogate pair is shown as the character it encodes).

    Backslashes are left alone, so a typed literal `\\x1b` looks like an escaped ESC; that is
    harmless because neither reaches the terminal as a control.
    """
    return escape_lone_surrogates(_CONTROL.sub(_escape, text))


def display_inline_text(text: str) -> str:
    """`display_text` for single-line fields: LF is escaped as `\\x0a` too."""
    return display_text(text).replace("\n", "\\x0a")


_RAW_IN_JSON = re.compile("[\x7f-\x9f]")


def inert_json(line: str) -> str:
    """JSON text with DEL and C1 controls written as `\\u00XX` and lone surrogates as `\\udXXX`:
    the same value, terminal-safe and valid UTF-8.

    `json.dumps` escapes C0 controls itself, but leaves DEL and C1 raw (0x9b is an 8-bit CSI),
    and with `ensure_ascii=False` lone surrogates too.
    """
    return escape_lone_surrogates(_RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", line))
