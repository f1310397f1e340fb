"""Placement: how a prompt and its attached contexts become logged events.

`prompt-prefix` contexts are baked into the prompt event itself, ahead of the delimiter block,
with a model-hidden envelope that keeps the direct prompt for display. Every other context
becomes its own `context/message` right after the prompt event. A prompt without prefix
contexts is written exactly as a host that knows nothing of contexts would write it: no
envelope key at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.session.events import PROMPT_DELIMITER

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue

PROMPT_PREFIX = "prompt-prefix"


@dataclass(frozen=True)
class Placement:
    """The prompt event's data and the contexts still to be written after it, in order."""

    data: dict[str, JsonValue]
    separate: tuple[Json, ...]


def place(content: Sequence[Json], source: Json, contexts: Sequence[Json]) -> Placement:
    """Bake prefix contexts into `{content, source, envelope?}`; keep the others separate."""
    prefix = [c for c in contexts if c.get("placement") == PROMPT_PREFIX]
    separate = tuple(c for c in contexts if c.get("placement") != PROMPT_PREFIX)
    if not prefix:
        return Placement({"content": content, "source": source}, separate)
    baked = [block for c in prefix for block in c["content"]]
    data = {
        "content": [*baked, {"type": "text", "text": PROMPT_DELIMITER}, *content],
        "source": source,
        "envelope": {
            "displayContent": content,
            "prefixContexts": [_prefix_entry(c) for c in prefix],
        },
    }
    return Placement(data, separate)


def _prefix_entry(context: Json) -> dict[str, JsonValue]:
    # Only provenance survives: the content is already in the prompt, the placement is implied.
    entry: dict[str, JsonValue] = {"source": context["source"]}
    if "meta" in context:
        entry["meta"] = context["meta"]
    return entry


def context_message(context: Json) -> dict[str, JsonValue]:
    """The `context/message` data of a separate context: `{content, source, meta?}`, no placement."""
    data: dict[str, JsonValue] = {"content": context["content"], "source": context["source"]}
    if "meta" in context:
        data["meta"] = context["meta"]
    return data
