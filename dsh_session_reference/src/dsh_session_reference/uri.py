"""The host-neutral session URI: ``dsh-session:`` + base64url(JSON string of the session id)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Final

from dsh_session_reference.errors import ErrorCode, SessionReferenceError
from dsh_session_reference.jsjson import js_stringify

SCHEME: Final = "dsh-session:"

_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+")


def encode_uri(session_id: str) -> str:
    """Return the canonical URI of ``session_id`` (any string, the empty one included)."""
    payload = base64.urlsafe_b64encode(js_stringify(session_id).encode("utf-8"))
    return SCHEME + payload.rstrip(b"=").decode("ascii")


def decode_uri(uri: str) -> str:
    """Return the session id of a canonical session URI.

    Raises ``SessionReferenceError`` (``INVALID_REFERENCE``) for anything else. Validity is
    decided by re-encoding: the URI must be exactly what ``encode_uri`` produces for the id it
    decodes to, which rejects padding, stray bits, alternative JSON spellings and bad UTF-8
    without a rule for each.
    """
    if not uri.startswith(SCHEME):
        raise _invalid(uri)
    payload = uri[len(SCHEME) :]
    if not _PAYLOAD.fullmatch(payload):
        raise _invalid(uri)
    try:
        decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        session_id = json.loads(decoded.decode("utf-8"))
    except (binascii.Error, ValueError, RecursionError) as error:
        raise _invalid(uri, error) from error
    if not isinstance(session_id, str):
        raise _invalid(uri, TypeError("decoded session id is not a string"))
    if encode_uri(session_id) != uri:
        raise _invalid(uri, ValueError("URI is not canonical"))
    return session_id


def _invalid(uri: str, cause: BaseException | None = None) -> SessionReferenceError:
    return SessionReferenceError(
        ErrorCode.INVALID_REFERENCE, f"invalid session reference URI {js_stringify(uri)}", cause
    )
