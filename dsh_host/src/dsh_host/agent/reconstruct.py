"""Rebuild a step's model request from the session log alone ("model-visible means logged").

Every request the agent sends is a pure function of the log: its messages are those derived
from the surface strictly before the step's `step/start`, and everything else comes from the
latest `request/header` snapshot at the step's dispatch. `rebuild_request` computes that
function; `request_json` puts a sent `ModelRequest` in the same shape, so the two can be
compared as plain JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh_host.models.base import ModelRequest
from dsh_host.session.events import Event, SessionHeader
from dsh_host.session.frozen import thaw
from dsh_host.session.request_header import canonical_header, fold_request_header
from dsh_host.session.session import Session

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue

# Once the step's stream has produced anything, its request was already dispatched.
_DISPATCHED = frozenset({"assistant/chunk", "assistant/message", "step/end", "step/start", "turn/end"})


def rebuild_request(events: Sequence[Event], step_start_seq: int) -> dict[str, JsonValue]:
    """The request of the step whose `step/start` is `events[step_start_seq]`, from the log.

    Returns `{provider, model, messages, system?, tools?, temperature?, maxTokens?, stop?}` as
    plain JSON. Raises ValueError when that event is not a `step/start` or no header was logged
    by the step's dispatch.
    """
    if events[step_start_seq].type != "step/start":
        raise ValueError(f"event {step_start_seq} is a {events[step_start_seq].type}, not a step/start")
    dispatch = step_start_seq + 1
    while dispatch < len(events) and events[dispatch].type not in _DISPATCHED:
        dispatch += 1
    folded = fold_request_header(events[:dispatch])
    if folded is None:
        raise ValueError(f"no request/header was logged by the dispatch of step/start {step_start_seq}")
    header = canonical_header(folded)
    history = Session(SessionHeader(id="rebuild", created_at=0), events[:step_start_seq]).derive_messages()
    return _request_shape(header["config"], [*header.get("messagePrefix", ()), *history], header)


def request_json(request: ModelRequest) -> dict[str, JsonValue]:
    """A sent request in the shape `rebuild_request` returns (signal and ids left out)."""
    config: dict[str, JsonValue] = {"provider": request.provider, "model": request.model}
    for key, value in (("temperature", request.temperature), ("maxTokens", request.max_tokens)):
        if value is not None:
            config[key] = value
    if request.stop is not None:
        config["stop"] = list(request.stop)
    header: dict[str, JsonValue] = {}
    if request.system is not None:
        header["system"] = request.system
    if request.tools is not None:
        header["tools"] = request.tools
    return _request_shape(config, request.messages, header)


def _request_shape(config: Json, messages: Sequence[JsonValue], header: Json) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {
        "provider": config["provider"],
        "model": config["model"],
        "messages": thaw(list(messages)),
    }
    for key in ("system", "tools"):
        if key in header:
            out[key] = thaw(header[key])
    for key in ("temperature", "maxTokens", "stop"):
        if key in config:
            out[key] = thaw(config[key])
    return out
