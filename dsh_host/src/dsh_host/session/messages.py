"""Projection of surface events to model messages (the only one: `derive_event_message`)."""

from __future__ import annotations

from typing import Any

from dsh_host.session.events import Event


def derive_event_message(event: Event) -> dict[str, Any] | None:
    """The model message for a surface event, or None when it projects to nothing.

    Only the content reaches the model: `source`, `envelope`, `meta`, the steering `turn` and
    assistant `usage` stay in the log. No framing is added around any content.
    """
    kind, data = event.type, event.data
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
