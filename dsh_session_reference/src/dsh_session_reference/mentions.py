"""Inline mention markup ``@[label](dsh-session:...)`` and parsing mentions out of free text.

The parser mirrors a JavaScript regular expression character for character, so the JS meanings
of ``.`` and ``\\s`` are written out as explicit classes: Python's versions differ (Python's
``\\s`` also matches ``\\x1c``-``\\x1f`` and ``\\x85`` and misses U+FEFF).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsh_host.text import JS_WHITESPACE
from dsh_session_reference.errors import ErrorCode, SessionReferenceError
from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.uri import SCHEME, decode_uri, encode_uri

# Characters JS `.` refuses to match.
_JS_LINE_TERMINATORS = r"\n\r\u2028\u2029"
# Exactly the characters JS `\s` matches.
_JS_WHITESPACE = re.escape(JS_WHITESPACE)

# Two alternatives tried in this order at each position: an explicit Markdown mention whose
# URI group takes any run of non-`)` non-whitespace (decoded later, so garbage fails loudly),
# then a bare URI made of base64url characters only.
_MENTION = re.compile(
    r"@\[(?P<label>(?:\\[^" + _JS_LINE_TERMINATORS + r"]|[^\\\]])*)\]"
    r"\((?P<uri>" + re.escape(SCHEME) + r"[^)" + _JS_WHITESPACE + r"]*)\)"
    r"|(?P<bare>" + re.escape(SCHEME) + r"[A-Za-z0-9_-]+)"
)
_LABEL_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_LABEL_SPECIAL = re.compile(r"[\\\]]")


@dataclass(frozen=True)
class SessionReferenceInput:
    """One structured reference as a host passes it to ``prepare``; no label means the id."""

    session_id: str
    label: str | None = None


@dataclass(frozen=True)
class ParsedText:
    """Text with every mention replaced by ``@label``, and the references in appearance order.

    Duplicates are kept; ``prepare`` deduplicates them.
    """

    text: str
    references: list[SessionReferenceInput]


def format_mention(session_id: str, label: str | None = None) -> str:
    """Return ``@[label](uri)``; the label defaults to the id, ``\\`` and ``]`` are escaped."""
    shown = session_id if label is None else label
    return "@[" + _LABEL_SPECIAL.sub(r"\\\g<0>", shown) + "](" + encode_uri(session_id) + ")"


def parse_reference(text: str) -> SessionReferenceInput:
    """One reference written on its own: a session id, its URI, or one whole ``@[label](uri)`` mention.

    Text starting with ``@[`` must be exactly one mention and text starting with the scheme
    exactly one URI (``SessionReferenceError``, ``INVALID_REFERENCE``, otherwise); anything
    else is a session id, as given. Only a mention carries a label.
    """
    if text.startswith(SCHEME):
        return SessionReferenceInput(decode_uri(text))
    if text.startswith("@["):
        match = _MENTION.fullmatch(text)
        if match is None or match.group("uri") is None:
            raise SessionReferenceError(ErrorCode.INVALID_REFERENCE, f"not one session mention: {js_stringify(text)}")
        return SessionReferenceInput(decode_uri(match.group("uri")), _LABEL_ESCAPE.sub(r"\1", match.group("label")))
    return SessionReferenceInput(text)


def has_reference(text: str) -> bool:
    """Whether `text` may hold a mention or bare URI at all (both contain the scheme)."""
    return SCHEME in text


def parse_text(text: str) -> ParsedText:
    """Replace every mention and bare session URI in ``text`` with ``@label``.

    The label of an explicit mention is its unescaped label; a bare URI is labelled with the
    decoded session id. If any matched URI fails to decode the whole parse fails with
    ``SessionReferenceError`` (``INVALID_REFERENCE``): a half-resolved message is never sent.
    """
    pieces: list[str] = []
    references: list[SessionReferenceInput] = []
    copied_up_to = 0
    for match in _MENTION.finditer(text):
        bare = match.group("bare")
        if bare is None:
            session_id = decode_uri(match.group("uri"))
            label = _LABEL_ESCAPE.sub(r"\1", match.group("label"))
        else:
            session_id = decode_uri(bare)
            label = session_id
        references.append(SessionReferenceInput(session_id, label))
        pieces.append(text[copied_up_to : match.start()])
        pieces.append("@" + label)
        copied_up_to = match.end()
    pieces.append(text[copied_up_to:])
    return ParsedText("".join(pieces), references)
