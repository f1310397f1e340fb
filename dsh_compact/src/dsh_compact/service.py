"""The `compact` service: explicit, automatic and manual compaction of a session.

- `compact_region` compacts an explicit run of surface nodes (the transaction itself).
- `compact_if_needed` is what the automatic triggers call: under context pressure it prunes
  oversized tool results (when a pruner is configured), then compacts until the estimate is
  below the threshold; after a context-overflow failure it prunes, then compacts all but the
  newest balanced tail.
- `compact_now` is manual compaction (`dsh compact`, `/compact`): it keeps the policy's retained
  tail whatever the pressure, and brackets the work in a turn of its own when none is open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from dsh_compact.config import TargetPressureConfigError
from dsh_compact.errors import CompactionError
from dsh_compact.targets import CompactAgent, ModelTarget, routed_target

if TYPE_CHECKING:
    import asyncio

    from dsh_compact.config import CompactConfig, TargetPolicy
    from dsh_compact.meter import TokenMeter
    from dsh_compact.prune import ToolResultPruner
    from dsh_compact.summarizer import Summarizer
    from dsh_compact.transaction import CompactionResult
    from dsh_host import Agent, Session
    from dsh_host.hookspecs import Json, JsonValue

Trigger = Literal["pressure", "context-overflow"]

CapacityLookup = Callable[[ModelTarget], int | None]
"""The context window an adapter reports for a target, or None when it does not know it."""

Flush = Callable[["Session"], Awaitable[None]]

USER_SOURCE: Mapping[str, str] = MappingProxyType({"kind": "user"})


class CompactionService:
    """Compaction for the sessions of one host, under one `[plugins.compact]` configuration.

    Building one loads none of the compaction machinery (the meter, the region selection, the
    transaction and what they read of the log): the first compaction does, so mounting the
    plugin stays cheap for commands that never compact.
    """

    def __init__(
        self,
        config: CompactConfig,
        *,
        summarizer: Summarizer,
        capacity: CapacityLookup,
        meter: TokenMeter | None = None,
        default_target: Callable[[], ModelTarget | None] | None = None,
        flush: Flush | None = None,
        pruner: ToolResultPruner | None = None,
    ) -> None:
        """`default_target` names the model manual compaction falls back to when the session
        never routed a request; `flush` persists a session after a turn `compact_now` opened;
        `pruner` prunes oversized tool results before the automatic triggers summarize."""
        self.config = config
        self.pruner = pruner
        self.summarizer = summarizer
        self._meter = meter
        self._capacity = capacity
        self._default_target = default_target
        self._flush = flush

    @property
    def meter(self) -> TokenMeter:
        """The token meter that estimates what a session's next request costs."""
        if self._meter is None:
            from dsh_compact.meter import TokenMeter

            self._meter = TokenMeter()
        return self._meter

    async def compact_region(
        self, agent: Agent | CompactAgent | Session, start: int, end: int, signal: asyncio.Event | None = None
    ) -> CompactionResult:
        """Replace the surface run from `start` to `end` (seqs, by surface position) with a checkpoint.

        `agent` is an agent (anything with a `session`), a `CompactAgent` or a `Session`.
        """
        from dsh_compact.transaction import compact_region

        return await compact_region(
            CompactAgent.of(agent), start, end, meter=self.meter, summarizer=self.summarizer, signal=signal
        )

    async def compact_if_needed(
        self, agent: Agent | CompactAgent | Session, trigger: Trigger, signal: asyncio.Event | None = None
    ) -> CompactionResult | None:
        """Compact if the routed target's policy calls for it; None when nothing was compacted.

        Only a session that routed a request has a target; without one nothing happens. Under
        `pressure` a target whose capacity is unknown, or whose budgets collide, raises
        `TargetPressureConfigError`; compaction that cannot get below the threshold within the
        allowed attempts raises `CompactionError`.
        """
        from dsh_compact.region import select_compactable_range

        compact_agent = CompactAgent.of(agent)
        session = compact_agent.session
        target = routed_target(session)
        if target is None:
            return None
        policy = self.config.policy_for(target)
        measurement = self.meter.measure(session)
        if trigger == "context-overflow":
            if self.pruner is not None:
                self.pruner.prune_session(session)
                measurement = self.meter.measure(session)
            selected = select_compactable_range(session, measurement, 0)
            if selected is None:
                return None
            return await self.compact_region(compact_agent, selected.start, selected.end, signal)
        if trigger != "pressure":
            raise ValueError(f"unknown compaction trigger {trigger!r}")
        window = self._window(target, policy)
        if window is None:
            raise TargetPressureConfigError(
                target.key,
                f"compact: no context capacity for {target.key}; configure context_window in "
                "[plugins.compact] or on that adapter model",
            )
        spec = policy.scale(target, window)
        if measurement.total_tokens < spec.threshold_tokens:
            return None
        if self.pruner is not None:
            # A prune that relieves the pressure stands on its own: it is durable, no summary.
            self.pruner.prune_session(session)
            measurement = self.meter.measure(session)
            if measurement.total_tokens < spec.threshold_tokens:
                return None
        result: CompactionResult | None = None
        for _attempt in range(spec.compaction_retries + 1):
            selected = select_compactable_range(session, measurement, spec.retain_tokens)
            if selected is None:
                if result is None:
                    return None
                break
            result = await self.compact_region(compact_agent, selected.start, selected.end, signal)
            measurement = self.meter.measure(session)
            if measurement.total_tokens < spec.threshold_tokens:
                return result
        raise CompactionError(
            f"compaction still above threshold after {spec.compaction_retries + 1} compaction attempts "
            f"({measurement.total_tokens} estimated tokens >= threshold {spec.threshold_tokens})"
        )

    async def compact_now(
        self,
        agent: Agent | CompactAgent | Session,
        *,
        retain_tokens: int | None = None,
        signal: asyncio.Event | None = None,
        source: Json = USER_SOURCE,
    ) -> CompactionResult | None:
        """Compact everything but the retained tail now, whatever the pressure.

        The tail kept costs at least `retain_tokens`, by default the policy's retain budget
        (scaled by the context window when the policy uses a ratio; 0 when the window is
        unknown). Returns None when there is nothing to compact, writing nothing. When no turn
        is open, the compaction runs in a turn of its own, `turn/start {trigger: {kind:
        "compact", source}}` ... `turn/end`, which is then flushed; the caller must not start a
        turn on the session meanwhile.
        """
        from dsh_compact.region import select_compactable_range
        from dsh_compact.transaction import inspect_turn_tail

        compact_agent = CompactAgent.of(agent)
        if compact_agent.fallback is None and self._default_target is not None:
            compact_agent = replace(compact_agent, fallback=self._default_target())
        session = compact_agent.session
        if retain_tokens is None:
            retain_tokens = self._retain_budget(routed_target(session) or compact_agent.fallback)
        selected = select_compactable_range(session, self.meter.measure(session), retain_tokens)
        if selected is None:
            return None
        if inspect_turn_tail(session).turn is not None:
            return await self.compact_region(compact_agent, selected.start, selected.end, signal)
        turn = session.last_turn_number() + 1
        session.append("turn/start", {"turn": turn, "trigger": {"kind": "compact", "source": dict(source)}})
        try:
            result = await self.compact_region(compact_agent, selected.start, selected.end, signal)
        except BaseException as exc:
            session.append("turn/end", {"turn": turn, "reason": _failure_reason(exc, signal)})
            await self._persist(session)
            raise
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        await self._persist(session)
        return result

    def _window(self, target: ModelTarget, policy: TargetPolicy) -> int | None:
        if policy.context_window is not None:
            return policy.context_window
        return self._capacity(target)

    def _retain_budget(self, target: ModelTarget | None) -> int:
        policy = self.config.policy_for(target)
        if policy.retain_tokens is not None:
            return policy.retain_tokens
        window = self._window(target, policy) if target is not None else policy.context_window
        if window is None or policy.retain_ratio is None:
            return 0
        return int(window * policy.retain_ratio)

    async def _persist(self, session: Session) -> None:
        if self._flush is not None:
            await self._flush(session)


def _failure_reason(exc: BaseException, signal: asyncio.Event | None) -> dict[str, JsonValue]:
    """The `turn/end` reason of a manual compaction turn that did not complete."""
    import asyncio

    if isinstance(exc, asyncio.CancelledError) or (signal is not None and signal.is_set()):
        return {"kind": "aborted"}
    reason: dict[str, JsonValue] = {"kind": "error", "step": 0, "message": str(exc) or type(exc).__name__}
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        reason["code"] = code
    return reason
