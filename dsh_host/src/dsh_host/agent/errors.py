"""Durable error text: exception cause chains rendered into `turn/end` reasons.

A turn that fails records one line of text, so a log read later (by a person, or by the model on
the next turn) says what went wrong and why: the message, the members of an exception group, and
the explicit cause (`raise ... from cause`) after a colon.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue

CIRCULAR = "<circular cause>"
UNRENDERABLE = "<unrenderable value>"

# BaseExceptionGroup is 3.11+; on 3.10 no exception has members.
_GROUP: Any = getattr(builtins, "BaseExceptionGroup", ())


def render_error(value: object) -> str:
    """Render `value` and its cause chain as one line.

    An exception renders its message (its class name when the message is empty); an exception
    group appends its rendered members as ` [a; b]`; a cause appends `: <cause>` unless it
    renders exactly like the message. A cause already on the path renders as
    `<circular cause>`, and a value whose rendering raises as `<unrenderable value>`.
    """
    return _render(value, ())


def _render(value: object, path: tuple[int, ...]) -> str:
    try:
        if not isinstance(value, BaseException):
            return str(value)
        message = value.message if isinstance(value, _GROUP) else str(value)
        message = message or type(value).__name__
        path = (*path, id(value))
        text = message
        if isinstance(value, _GROUP) and value.exceptions:
            text += " [" + "; ".join(_render(member, path) for member in value.exceptions) + "]"
        cause = value.__cause__
        if cause is not None:
            rendered = CIRCULAR if id(cause) in path else _render(cause, path)
            if rendered != message:
                text += ": " + rendered
        return text
    except Exception:  # noqa: BLE001 - a broken __str__ must not break the turn's close
        return UNRENDERABLE


def error_code(error: BaseException) -> str | None:
    """The error's `code` attribute when it is a string (`ModelFailure`, tool errors, ...)."""
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else None


def error_reason(step: int, error: BaseException) -> dict[str, JsonValue]:
    """`{kind: 'error', step, message, code?}`: the turn-end reason of a failure."""
    reason: dict[str, JsonValue] = {"kind": "error", "step": step, "message": render_error(error)}
    code = error_code(error)
    if code is not None:
        reason["code"] = code
    return reason


def failure_reason(step: int, failure: Json, error: BaseException) -> dict[str, JsonValue]:
    """`{kind: 'error', step, failure}` for a failed model request.

    The failure keeps every field the adapter normalised; its message becomes the rendered
    chain, unless the chain cannot be rendered.
    """
    rendered = render_error(error)
    message = failure.get("message") if rendered == UNRENDERABLE else rendered
    return {"kind": "error", "step": step, "failure": {**failure, "message": message}}
