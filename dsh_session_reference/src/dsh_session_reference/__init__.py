"""Cross-session references for dsh.

Mention another session as ``@[label](dsh-session:...)`` and the next message carries a bounded,
frozen, prompt-injection-safe snapshot of it. This package root exposes the host-independent
core (URIs, mention markup and parsing, tag-safe JSON, the error type) and the service.

Names are loaded on first use: a host imports this package (for its `session-reference`
plugin) on every command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_session_reference.errors import ErrorCode, SessionReferenceError, render_error_chain
    from dsh_session_reference.jsjson import tag_safe_json
    from dsh_session_reference.mentions import (
        ParsedText,
        SessionReferenceInput,
        format_mention,
        parse_reference,
        parse_text,
    )
    from dsh_session_reference.service import Prepared, SessionReferenceService
    from dsh_session_reference.uri import SCHEME, decode_uri, encode_uri

_HOMES = {
    "ErrorCode": "errors",
    "SessionReferenceError": "errors",
    "render_error_chain": "errors",
    "tag_safe_json": "jsjson",
    "ParsedText": "mentions",
    "SessionReferenceInput": "mentions",
    "format_mention": "mentions",
    "parse_reference": "mentions",
    "parse_text": "mentions",
    "Prepared": "service",
    "SessionReferenceService": "service",
    "SCHEME": "uri",
    "decode_uri": "uri",
    "encode_uri": "uri",
}

__all__ = [
    "SCHEME",
    "ErrorCode",
    "ParsedText",
    "Prepared",
    "SessionReferenceError",
    "SessionReferenceInput",
    "SessionReferenceService",
    "decode_uri",
    "encode_uri",
    "format_mention",
    "parse_reference",
    "parse_text",
    "render_error_chain",
    "tag_safe_json",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh_session_reference' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
