"""Projection of surface events to model messages (the only one: `derive_event_message`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from dsh_host.session.events import Event
from dsh_host.session.snapshots import SurfaceSnapshot

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue
    from dsh_host.session.session import Session


def derive_event_message(event: Event) -> dict[str, JsonValue] | None:
    """The model message for a surface event, or None when it projects to nothing.

    Only the content reaches the model: `source`, `envelope`, `meta`, the steering `turn` and
    assistant `usage` stay in the log. No framing is added around any content.
    """
    return _derive(event.type, event.data)


def _derive(kind: str, data: Json) -> dict[str, JsonValue] | None:
    if kind in ("user/message", "context/message", "steering/message"):
        return {"role": "user", "content": data["content"]}
    if kind == "assistant/message":
        if not data["content"]:
            return None
        return {"role": "assistant", "content": data["content"], "provenance": data["provenance"]}
    if kind == "tool/result":
        block = {
            "type": "tool-result",
            "toolCallId": data["callId"],
            "content": data["content"],
            "isError": data["isError"],
        }
        return {"role": "user", "content": [block]}
    return None


class SurfaceMessage(NamedTuple):
    """One message the model sees, as text: its `role`, the surface event's `type` and `seq`."""

    role: str
    text: str
    type: str
    seq: int


def surface_messages(surface: SurfaceSnapshot | Session) -> Iterator[SurfaceMessage]:
    """The messages a session's current surface gives the model, in order, each as its text.

    `surface` is a snapshot (`await session_query.read_surface(id)`) or a live `Session`. The
    text of a message is its text blocks joined (a tool result's: the text blocks of its
    output); reasoning and tool calls contribute nothing, and an event that gives the model no
    message (an empty assistant message) is skipped.
    """
    items: Iterator[tuple[str, Json, int]]
    if isinstance(surface, SurfaceSnapshot):
        items = ((event["type"], event["data"], event["seq"]) for event in surface.events)
    else:
        items = ((e.type, e.data, e.seq) for e in map(surface.event, surface.surface.nodes))
    for kind, data, seq in items:
        message = _derive(kind, data)
        if message is not None:
            yield SurfaceMessage(message["role"], _text(message["content"]), kind, seq)


def _text(content: JsonValue) -> str:
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool-result":
            parts.append(_text(block.get("content") or ()))
    return "".join(parts)
