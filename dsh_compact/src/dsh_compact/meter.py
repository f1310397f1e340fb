"""The token meter: a character heuristic for what a request will cost, corrected by usage.

Lengths are JavaScript string lengths (UTF-16 code units, so an emoji counts 2), because the
reference prices that way and budgets must agree with it. A text block costs
`ceil(len/4) + 4`, a message the sum of its blocks plus 4.

Provider usage, when logged, corrects the heuristic: every `assistant/message` records an
anchor, the real size of that request (usage, when it is at least the heuristic estimate) and
the surface size it corresponds to. While the request header is unchanged, the estimate is the
anchor plus whatever the surface gained or lost since.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh_host import Event, Session
from dsh_host.log import Surface, canonical_header, derive_event_message, header_equals, plan_transition
from dsh_host.models import StreamAssembler

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json, JsonValue

CHARS_PER_TOKEN = 4
BLOCK_OVERHEAD = 4
ROLE_OVERHEAD = 4

_USAGE_KEYS = ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens")


def js_length(text: str) -> int:
    """The length of `text` in UTF-16 code units (JavaScript's `String.length`)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _chars_to_tokens(text: str) -> int:
    return -(-js_length(text) // CHARS_PER_TOKEN)


def _json(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def estimate_block(block: Json) -> int:
    """The heuristic price of one content block."""
    kind = block.get("type")
    if kind in ("text", "reasoning") and isinstance(block.get("text"), str):
        return _chars_to_tokens(block["text"]) + BLOCK_OVERHEAD
    if kind == "tool-call":
        return (
            _chars_to_tokens(str(block.get("name", "")))
            + _chars_to_tokens(str(block.get("arguments", "")))
            + BLOCK_OVERHEAD
        )
    if kind == "tool-result":
        return estimate_blocks(block.get("content") or ()) + BLOCK_OVERHEAD
    return BLOCK_OVERHEAD + _chars_to_tokens(_json(block))


def estimate_blocks(blocks: Sequence[Json]) -> int:
    return sum(estimate_block(block) for block in blocks)


def estimate_message(message: Json) -> int:
    """The heuristic price of one model message (its blocks plus the role overhead)."""
    return estimate_blocks(message.get("content") or ()) + ROLE_OVERHEAD


def estimate_header(header: Json | None) -> int:
    """The price of a request envelope: message prefix, system prompt and tool list."""
    if header is None:
        return 0
    tokens = sum(estimate_message(m) for m in header.get("messagePrefix") or ())
    if header.get("system"):
        tokens += _chars_to_tokens(header["system"]) + BLOCK_OVERHEAD
    if header.get("tools"):
        tokens += _chars_to_tokens(_json(header["tools"])) + BLOCK_OVERHEAD
    return tokens


def estimate_event(event: Event) -> int:
    """The price of a surface event: its derived message, or 0 when it derives to nothing."""
    message = derive_event_message(event)
    return 0 if message is None else estimate_message(message)


@dataclass(frozen=True)
class PricedNode:
    """One surface node and its price."""

    seq: int
    tokens: int


@dataclass(frozen=True)
class Measurement:
    """The priced surface, and the estimated size of the next request (`total_tokens`)."""

    total_tokens: int
    surface_tokens: int
    header_tokens: int
    nodes: tuple[PricedNode, ...]


@dataclass(frozen=True)
class _Anchor:
    header: Json | None
    baseline: int
    surface_tokens: int


@dataclass
class _Fold:
    """The meter's incremental view of one session: surface prices, header, latest anchor."""

    upto: int = 0
    surface: Surface = field(default_factory=Surface)
    prices: dict[int, int] = field(default_factory=dict)
    surface_tokens: int = 0
    step_surface_tokens: int | None = None
    header: Json | None = None
    anchor: _Anchor | None = None


class TokenMeter:
    """Measures sessions; folds each session's log once, then only what was appended since."""

    def __init__(self) -> None:
        self._folds: weakref.WeakKeyDictionary[Session, _Fold] = weakref.WeakKeyDictionary()

    @staticmethod
    def estimate_message(message: Json) -> int:
        """The heuristic price of one model message."""
        return estimate_message(message)

    def measure(self, session: Session) -> Measurement:
        """Price the current surface and estimate the next request's size."""
        state = self._folds.get(session)
        if state is None:
            state = self._folds[session] = _Fold()
        for seq in range(state.upto, session.seq):
            self._fold(session, state, session.event(seq))
        state.upto = session.seq
        nodes = tuple(PricedNode(seq, state.prices[seq]) for seq in state.surface.nodes)
        header_tokens = estimate_header(state.header)
        anchor = state.anchor
        if anchor is not None and header_equals(anchor.header, state.header):
            total = max(0, anchor.baseline + state.surface_tokens - anchor.surface_tokens)
        else:
            total = header_tokens + state.surface_tokens
        return Measurement(total, state.surface_tokens, header_tokens, nodes)

    def _fold(self, session: Session, state: _Fold, event: Event) -> None:
        if event.type == "request/header":
            state.header = canonical_header(event.data["header"])
        elif event.type == "step/start":
            state.step_surface_tokens = state.surface_tokens
        elif event.type == "step/end":
            state.step_surface_tokens = None
        elif event.type == "assistant/message":
            state.anchor = self._anchor(session, state, event)
        transition = plan_transition(event, state.surface.nodes, session.event)
        shadowed = state.surface.apply(transition)
        for seq in shadowed:
            state.surface_tokens -= state.prices.pop(seq)
        if transition.kind != "log-only":
            price = estimate_event(event)
            state.prices[event.seq] = price
            state.surface_tokens += price

    def _anchor(self, session: Session, state: _Fold, event: Event) -> _Anchor:
        usage = event.data.get("usage")
        usage_counts = isinstance(usage, Mapping) and state.header is not None
        if usage_counts and event.source_event_seqs:
            message_tokens = _reassembled_price(session, event.source_event_seqs)
        else:
            message_tokens = estimate_event(event)
        before = state.step_surface_tokens if state.step_surface_tokens is not None else state.surface_tokens
        anchor_surface = before + message_tokens
        estimate = estimate_header(state.header) + anchor_surface
        baseline = estimate
        if usage_counts:
            used = sum(_count(usage.get(key)) for key in _USAGE_KEYS)
            baseline = max(used, estimate)
        return _Anchor(state.header, baseline, anchor_surface)


def _reassembled_price(session: Session, sources: Sequence[int]) -> int:
    """The price of an assistant message as its logged stream chunks assemble it (0 if empty)."""
    assembler = StreamAssembler()
    for seq in sources:
        source = session.event(seq)
        if source.type == "assistant/chunk":
            assembler.feed(source.data["chunk"])
    content = assembler.finish().content
    return estimate_message({"role": "assistant", "content": content}) if content else 0


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
