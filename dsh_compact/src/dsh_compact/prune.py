"""Model-free tool-result pruning: an oversized result keeps its head and tail around a marker.

Before compaction summarizes anything (under pressure, and after a context overflow), every
current `tool/result` whose text exceeds `threshold_chars` code points is replaced by a new
`tool/result` with the same data but pruned `content`, replacing that one surface node
(`surfaceOp` replace, `sourceEventSeqs [original]`). The original stays in the log. Lengths are
Unicode code points (Python's `len`), so a surrogate pair is never split; only `text` blocks
count and are cut, other blocks keep their places. A pruned result has exactly `head_chars +
39 + tail_chars` code points, within the threshold, so a second pass changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from dsh_host import Session
    from dsh_host.hookspecs import JsonValue

PRUNE_MARKER = "\n\n[... tool result middle pruned ...]\n\n"
"""What replaces the removed middle (39 code points)."""


@dataclass(frozen=True)
class PruneConfig:
    """The validated `[plugins.compact.prune]` budgets, in code points (`head + 39 + tail <= threshold`)."""

    threshold_chars: int = 8192
    head_chars: int = 4096
    tail_chars: int = 1024


@dataclass(frozen=True)
class PrunedToolResult:
    """One replacement: the original and the replacement's seqs, the call, and the text sizes."""

    original_seq: int
    replacement_seq: int
    call_id: JsonValue
    chars_before: int
    chars_after: int


@dataclass(frozen=True)
class PruneResult:
    """What one `prune_session` pass replaced, and how many code points it removed in all."""

    pruned: tuple[PrunedToolResult, ...]
    chars_removed: int


def _text(block: JsonValue) -> str | None:
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return cast(str, block["text"])
    return None


def measure_content(blocks: Sequence[JsonValue]) -> int:
    """The code points of the `text` blocks of `blocks` (other blocks count 0)."""
    return sum(len(text) for text in map(_text, blocks) if text is not None)


def prune_content(blocks: Sequence[JsonValue], config: PruneConfig) -> list[JsonValue] | None:
    """`blocks` with the text middle `[head, total - tail)` replaced by the marker; None if within budget.

    The interval runs over the text of all `text` blocks in order. The marker goes into the first
    text block that overlaps it, between that block's kept head and kept tail; a text block left
    empty is dropped; every other block is kept as it is, in place.
    """
    total = measure_content(blocks)
    if total <= config.threshold_chars:
        return None
    head, removed_end = config.head_chars, total - config.tail_chars
    out: list[JsonValue] = []
    start = 0
    marked = False
    for block in blocks:
        text = _text(block)
        if text is None:
            out.append(block)
            continue
        end = start + len(text)
        kept = text[: _clamp(head - start, len(text))]
        if not marked and start < removed_end and end > head:
            kept += PRUNE_MARKER
            marked = True
        kept += text[_clamp(removed_end - start, len(text)) :]
        if kept:
            out.append({**block, "text": kept})
        start = end
    return out


def _clamp(value: int, length: int) -> int:
    return max(0, min(value, length))


class ToolResultPruner:
    """Prunes the oversized tool results of a session's current surface."""

    def __init__(self, config: PruneConfig) -> None:
        self.config = config

    def prune_session(self, session: Session) -> PruneResult:
        """Replace every oversized current `tool/result`, in surface order, in one pass.

        The surface is read once, before the first replacement. A failing append raises; the
        replacements made before it stay.
        """
        pruned: list[PrunedToolResult] = []
        for seq in list(session.surface.nodes):
            event = session.event(seq)
            if event.type != "tool/result" or not isinstance(event.data, Mapping):
                continue
            content = event.data.get("content")
            if not isinstance(content, list):
                continue
            replacement = prune_content(content, self.config)
            if replacement is None:
                continue
            appended = session.append(
                "tool/result",
                {**event.data, "content": replacement},
                surface_op={"op": "replace", "start": seq, "end": seq},
                sources=[seq],
            )
            pruned.append(
                PrunedToolResult(
                    seq, appended.seq, event.data.get("callId"), measure_content(content), measure_content(replacement)
                )
            )
        return PruneResult(tuple(pruned), sum(p.chars_before - p.chars_after for p in pruned))
