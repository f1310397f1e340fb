"""Cross-session references for dsh.

Mention another session as ``@[label](dsh-session:...)`` and the next message carries a bounded,
frozen, prompt-injection-safe snapshot of it. This package root exposes the host-independent
core (URIs, mention markup and parsing, tag-safe JSON, the error type) and the service.
"""

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
