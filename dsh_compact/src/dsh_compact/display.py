"""What compaction shows in the terminal transcript and adds to the model requests it makes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType

    from dsh_host.hookspecs import Json
    from dsh_host.ui import Transcript

COMPACTION_HEADER = "x-deepseek-harness-compact"
"""Marks a summary request, so DeepSeek's harness endpoint tells it from a loop step."""


def render_compact_end(data: Json, transcript: Transcript) -> list[RenderableType]:
    """`compact/end`: the failure, or that the conversation was compacted."""
    # Imported here: the UI namespace loads rich, and the header above is read on every request.
    from dsh_host import ui

    failure = data.get("error")
    if isinstance(failure, str):
        return [ui.error(f"Compaction failed: {failure}")]
    return [ui.notice("Conversation compacted.")]
