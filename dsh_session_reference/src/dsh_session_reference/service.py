"""`SessionReferenceService`: candidates for `@` mentions, and `prepare()` for a message.

Mounted as `host.services.session_references`. It reads sources only through the host's
session query service, and returns one frozen prompt-prefix context: the agent bakes it into
the same user (or steering) message, so nothing from a source reaches the target's log except
through this snapshot, and later changes to the source never change it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.asyncs import ignore_outcome
from dsh_session_reference.cancellation import cancelled as cancelled_error
from dsh_session_reference.cancellation import is_set, race
from dsh_session_reference.candidates import Candidate, candidate_of
from dsh_session_reference.errors import ErrorCode, SessionReferenceError, render_error_line
from dsh_session_reference.limits import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    MAX_REFERENCES,
    MAX_SAFE_INTEGER,
)
from dsh_session_reference.mentions import SessionReferenceInput, format_mention, parse_reference, parse_text
from dsh_session_reference.uri import SCHEME, decode_uri, encode_uri

if TYPE_CHECKING:
    import asyncio

    from dsh_host import Agent, Session, SessionHeader, SessionQuery
    from dsh_host.hookspecs import Json, JsonValue


@dataclass(frozen=True)
class Prepared:
    """What a host sends: the (copied) content and zero or one context."""

    content: list[dict[str, JsonValue]]
    contexts: list[dict[str, JsonValue]]

    def to_json(self) -> dict[str, JsonValue]:
        return {"content": self.content, "contexts": self.contexts}


def _positive_safe_int(value: object) -> bool:
    return type(value) is int and 1 <= value <= MAX_SAFE_INTEGER


def target_identity(target: Agent | Session | SessionHeader | None) -> tuple[str | None, str | None]:
    """The id and cwd of a target given as an agent, a session or a header; None for no target."""
    if target is None:
        return None, None
    for owner in (getattr(target, "session", None), target):
        header = getattr(owner, "header", None)
        if header is not None:
            return header.id, header.cwd
    return target.id, getattr(target, "cwd", None)


class SessionReferenceService:
    """Cross-session references over a session query service."""

    parse_text = staticmethod(parse_text)
    parse_reference = staticmethod(parse_reference)
    format_mention = staticmethod(format_mention)
    encode_uri = staticmethod(encode_uri)
    decode_uri = staticmethod(decode_uri)
    uri_scheme = SCHEME

    def __init__(
        self,
        query: SessionQuery,
        *,
        max_references: int = MAX_REFERENCES,
        candidate_limit: int = DEFAULT_CANDIDATE_LIMIT,
        max_reference_bytes: int = DEFAULT_MAX_REFERENCE_BYTES,
    ) -> None:
        for name, value in (
            ("maxReferences", max_references),
            ("candidateLimit", candidate_limit),
            ("maxReferenceBytes", max_reference_bytes),
        ):
            if not _positive_safe_int(value):
                raise SessionReferenceError(
                    ErrorCode.INVALID_CONFIG, f"session-reference: {name} must be a positive safe integer"
                )
        if max_references > MAX_REFERENCES:
            raise SessionReferenceError(
                ErrorCode.INVALID_CONFIG, f"session-reference: maxReferences must not exceed {MAX_REFERENCES}"
            )
        self._query = query
        self.max_references = max_references
        self.candidate_limit = candidate_limit
        self.max_reference_bytes = max_reference_bytes

    async def prepare(
        self,
        target: Agent | Session | SessionHeader,
        content: Sequence[Json],
        references: Sequence[SessionReferenceInput | Json],
        cancel: asyncio.Event | None = None,
    ) -> Prepared:
        """Turn references into one frozen snapshot context for the message `content`.

        `target` is the agent, session or header the message goes to, or None for none (a
        snapshot handed outside dsh: then no reference is to itself). Checks in order: each
        reference's shape, self reference, duplicates (first label wins), the count; then
        cancellation; then every source is read at once; any failure rejects the whole call, so
        a host never sends a partial context.
        """
        # Imported by the first preparation, not by mounting: the snapshot's making reads the
        # log's text (dsh_host.log) and runs on an event loop.
        import asyncio

        from dsh_session_reference.frame import build_context
        from dsh_session_reference.projection import project_texts
        from dsh_session_reference.retention import retain_source

        copied = json.loads(json.dumps(list(content)))
        target_id, _ = target_identity(target)
        normalized = self._normalize(references, target_id)
        if not normalized:
            return Prepared(copied, [])
        if is_set(cancel):
            raise cancelled_error(cancel)
        # One request for every source: they are read together, in one observation.
        read = asyncio.ensure_future(self._query.read_surface_texts([ref.session_id for ref in normalized]))
        try:
            snapshots = await race(read, cancel)
        except SessionReferenceError:
            raise
        except Exception as exc:
            if is_set(cancel):
                error = cancelled_error(cancel)
                # Chain the abort reason (when it is an exception), not the read's failure.
                raise error from error.__cause__
            raise SessionReferenceError(
                ErrorCode.READ_FAILED, f"failed to read referenced session: {exc}", exc
            ) from exc
        finally:
            ignore_outcome(read)
        if is_set(cancel):
            raise cancelled_error(cancel)
        retained = [
            retain_source(
                project_texts(snapshot.header, snapshot.captured_through_seq, snapshot.texts),
                ref.label if ref.label is not None else ref.session_id,
                self.max_reference_bytes,
            )
            for ref, snapshot in zip(normalized, snapshots, strict=True)
        ]
        return Prepared(copied, [build_context(retained)])

    def _normalize(self, references: Sequence[object], target_id: str | None) -> list[SessionReferenceInput]:
        seen: set[str] = set()
        out: list[SessionReferenceInput] = []
        for ref in references:
            session_id, label = _reference_fields(ref)
            if session_id == target_id:
                raise SessionReferenceError(
                    ErrorCode.SELF_REFERENCE,
                    f"session {json.dumps(target_id, ensure_ascii=False)} cannot reference itself",
                )
            if session_id in seen:
                continue
            seen.add(session_id)
            out.append(SessionReferenceInput(session_id, label if label is not None else session_id))
        if len(out) > self.max_references:
            raise SessionReferenceError(
                ErrorCode.TOO_MANY, f"a message may reference at most {self.max_references} sessions"
            )
        return out

    async def list_candidates(
        self,
        target: Agent | Session | SessionHeader,
        query: str = "",
        limit: int | None = None,
        cancel: asyncio.Event | None = None,
    ) -> list[Candidate]:
        """Sessions the target may mention, ranked; the query service's store does the search.

        A session matches on its id, cwd or latest title (ranked by cwd group, then newest first), or
        on what was said in it (then the candidate carries a snippet, and ranks after the name
        matches of its cwd group).
        """
        if limit is None:
            limit = self.candidate_limit
        elif not _positive_safe_int(limit):
            raise SessionReferenceError(ErrorCode.INVALID_REFERENCE, "candidate limit must be a positive safe integer")
        target_id, target_cwd = target_identity(target)
        if is_set(cancel):
            raise cancelled_error(cancel)
        rows = await race(
            self._query.search_candidates(
                query, target_id=target_id, target_cwd=target_cwd, limit=limit, signal=cancel
            ),
            cancel,
        )
        return [candidate_of(row) for row in rows]

    @staticmethod
    def describe_error(error: BaseException) -> str:
        """An error as one line, each cause in its chain named once (what `dsh` and `dsh mcp` show)."""
        return render_error_line(error)


def _reference_fields(ref: object) -> tuple[str, str | None]:
    session_id: object
    label: object
    if isinstance(ref, SessionReferenceInput):
        session_id, label = ref.session_id, ref.label
    elif isinstance(ref, Mapping):
        session_id, label = ref.get("sessionId"), ref.get("label")
        if "label" in ref and label is None:
            label = _INVALID
    elif isinstance(ref, (list, tuple)):
        # An array is an object in JavaScript: it fails the field check, not the object check.
        session_id, label = None, None
    else:
        raise SessionReferenceError(ErrorCode.INVALID_REFERENCE, "session reference must be an object")
    if not isinstance(session_id, str) or (label is not None and not isinstance(label, str)):
        raise SessionReferenceError(
            ErrorCode.INVALID_REFERENCE,
            "session reference must contain a string sessionId and optional string label",
        )
    return session_id, label


_INVALID = object()
