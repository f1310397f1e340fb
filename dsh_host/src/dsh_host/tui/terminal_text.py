"""Making untrusted text inert before it reaches the terminal.

Session titles, ids, cwds, message and tool text all come from logs or models, so any of them
may carry terminal control sequences (a window-title OSC, a CSI colour change, a bare BEL).
Everything the UI shows passes through `display_text` or `display_inline_text`, which turn
control characters into visible `\\xNN` text instead.
"""

from __future__ import annotations

import re

# Every C0 control except LF (which the transcript needs for structure), DEL, and every C1
# control (0x9b alone is a CSI on terminals that honour 8-bit controls).
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def display_text(text: str) -> str:
    """`text` with every control character except LF written as `\\xNN` (lowercase hex).

    Backslashes are left alone, so a typed literal `\\x1b` looks like an escaped ESC; that is
    harmless because neither reaches the terminal as a control.
    """
    return _CONTROL.sub(_escape, text)


def display_inline_text(text: str) -> str:
    """`display_text` for single-line fields: LF is escaped as `\\x0a` too."""
    return display_text(text).replace("\n", "\\x0a")


_RAW_IN_JSON = re.compile("[\x7f-\x9f]")


def inert_json(line: str) -> str:
    """JSON text with DEL and C1 controls written as `\\u00XX`: the same value, terminal-safe.

    JSON escapes C0 controls itself, but leaves DEL and C1 raw (0x9b is an 8-bit CSI).
    """
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
