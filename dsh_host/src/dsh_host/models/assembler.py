"""Assemble a stream of model chunks into one assistant message.

The rules are those of the reference implementation's stream assembler: blocks come out in the order their
index was first seen; a `block-end` is authoritative and the first one for an index wins; deltas
after it are ignored; a block that never closed is rebuilt from its deltas; the last `usage`
wins; a missing `finish` counts as `{"kind": "stop"}`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh_host.models.base import JsonDict

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue

_DELTA_BLOCK_TYPES = {"text-delta": "text", "reasoning-delta": "reasoning", "tool-call-delta": "tool-call"}


@dataclass(frozen=True)
class AssembledMessage:
    """The assistant message a stream produced."""

    content: list[JsonDict]
    usage: JsonDict | None
    finish: JsonDict
    replay_state: JsonValue = None


@dataclass
class _PartialBlock:
    index: int
    block_type: str | None = None
    text: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    closed: JsonDict | None = None

    def build(self) -> JsonDict:
        if self.closed is not None:
            return copy.deepcopy(self.closed)
        if self.block_type in ("text", "reasoning"):
            return {"type": self.block_type, "text": "".join(self.text)}
        if self.block_type == "tool-call":
            return {
                "type": "tool-call",
                "id": self.call_id if self.call_id is not None else f"call-{self.index}",
                "name": self.name,
                "arguments": "".join(self.arguments),
            }
        raise ValueError(f'cannot assemble incomplete block of type "{self.block_type}"')


class StreamAssembler:
    """Feed chunks in stream order with `feed`, then call `finish` once."""

    def __init__(self) -> None:
        self._blocks: dict[int, _PartialBlock] = {}  # insertion order is first-seen order
        self._usage: JsonDict | None = None
        self._finish: JsonDict | None = None
        self._replay_state: JsonValue = None

    def feed(self, chunk: JsonDict) -> None:
        """Take one stream chunk; unknown chunk types are ignored (the vocabulary is extensible)."""
        kind = chunk.get("type")
        if kind in _DELTA_BLOCK_TYPES:  # first: deltas are nearly all of a stream
            index = chunk["index"]
            block = self._blocks.get(index)
            if block is None:
                block = self._blocks[index] = _PartialBlock(index)
            elif block.closed is not None:
                return
            if block.block_type is None:
                block.block_type = _DELTA_BLOCK_TYPES[kind]
            if kind == "tool-call-delta":
                if chunk.get("id") is not None:
                    block.call_id = chunk["id"]
                if chunk.get("name"):
                    block.name = chunk["name"]
                block.arguments.append(chunk.get("argumentsDelta", ""))
            else:
                block.text.append(chunk.get("text", ""))
        elif kind == "usage":
            self._usage = copy.deepcopy(chunk.get("usage"))
        elif kind == "finish":
            self._finish = copy.deepcopy(chunk.get("reason"))
            self._replay_state = copy.deepcopy(chunk.get("replayState"))
        elif kind == "block-start":
            block = self._block(chunk["index"])
            if block.block_type is None:
                block.block_type = chunk.get("blockType")
        elif kind == "block-end":
            block = self._block(chunk["index"])
            if block.closed is None:
                block.closed = copy.deepcopy(chunk["block"])

    def finish(self) -> AssembledMessage:
        """The assembled message; raises ValueError for an unclosed block of an unknown type."""
        return AssembledMessage(
            content=[block.build() for block in self._blocks.values()],
            usage=copy.deepcopy(self._usage),
            finish=copy.deepcopy(self._finish) if self._finish is not None else {"kind": "stop"},
            replay_state=copy.deepcopy(self._replay_state),
        )

    def _block(self, index: int) -> _PartialBlock:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _PartialBlock(index)
        return block
