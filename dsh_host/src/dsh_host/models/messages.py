"""Reading the messages of a model request: their text, and what a reply would answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json


def unanswered_messages(messages: Sequence[Json]) -> list[Json]:
    """The user messages after the last assistant message: what a reply to them answers."""
    pending: list[Json] = []
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "user":
            pending.insert(0, message)
    return pending


def message_text(message: Json) -> str:
    """The text blocks of a model message (`{role, content}`), concatenated.

    Content given as a plain string is that string; tool calls, tool results and other
    non-text blocks contribute nothing.
    """
    content = message.get("content", ())
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")
