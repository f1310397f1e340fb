"""The automatic triggers: compaction after a step under pressure, and overflow recovery.

`AutoCompaction` is a pluggy plugin object the `compact` plugin registers on the host's plugin
manager only when `[plugins.compact] auto` is true, and removes on unmount. Its failures never
fail a turn: the pressure trigger warns and lets the turn go on (once per target for a target it
cannot be applied to), and the overflow recovery either authorises a retry or leaves the
original request failure to stand.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from dsh_compact.config import TargetPressureConfigError
from dsh_compact.targets import CompactAgent, routed_target
from dsh_host import hookimpl

if TYPE_CHECKING:
    import asyncio

    from dsh_compact.service import CompactionService
    from dsh_compact.transaction import CompactionResult
    from dsh_host import Agent
    from dsh_host.hookspecs import Json

log = logging.getLogger("dsh.compact")

CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
RETRY: Literal["retry"] = "retry"
FAIL: Literal["fail"] = "fail"


class AutoCompaction:
    """Hook implementations for `dsh_agent_post_step` and `dsh_agent_request_error`."""

    def __init__(self, service: CompactionService) -> None:
        self._service = service
        self._warned_targets: set[str] = set()

    @hookimpl
    async def dsh_agent_post_step(self, agent: Agent, turn: int, step: int, signal: asyncio.Event) -> None:
        """Relieve context pressure before the step closes; never fails the turn."""
        if _aborted(signal):
            return
        try:
            result = await self._service.compact_if_needed(agent, "pressure", signal)
        except TargetPressureConfigError as exc:
            # A misconfigured target would otherwise warn after every single step.
            if exc.target_key not in self._warned_targets:
                self._warned_targets.add(exc.target_key)
                log.warning("post-step compaction failed: %s; continuing the turn", exc)
            return
        except Exception as exc:  # noqa: BLE001 - pressure relief is best effort; the turn goes on
            log.warning("post-step compaction failed: %s; continuing the turn", exc)
            return
        if result is not None:
            log.info("compaction (post-step pressure): %s", _describe(result))

    @hookimpl
    def dsh_agent_request_error(
        self,
        agent: Agent,
        turn: int,
        step: int,
        error: BaseException,
        failure: Json,
        prior_failures: Sequence[Json],
        signal: asyncio.Event,
    ) -> Awaitable[Literal["retry", "fail"]] | None:
        """Compact and retry after a context-overflow failure, within the policy's retry budget.

        Abstains (None, synchronously, so the next implementation decides) for any other
        failure, a cancelled turn, a session that never routed a request, or a spent budget.
        Once it compacts it decides itself: "retry" when the surface changed, else "fail".
        """
        if _code(failure) != CONTEXT_WINDOW_EXCEEDED or _aborted(signal):
            return None
        compact_agent = CompactAgent.of(agent)
        target = routed_target(compact_agent.session)
        if target is None:
            return None
        prior = sum(1 for f in prior_failures if _code(f) == CONTEXT_WINDOW_EXCEEDED)
        if prior >= self._service.config.policy_for(target).max_overflow_retries:
            return None
        return self._recover(compact_agent, signal)

    async def _recover(self, agent: CompactAgent, signal: asyncio.Event | None) -> Literal["retry", "fail"]:
        surface = agent.session.surface
        generation = surface.replace_generation
        try:
            result = await self._service.compact_if_needed(agent, "context-overflow", signal)
        except Exception as exc:  # noqa: BLE001 - the original request error is what the turn reports
            if not _aborted(signal) and surface.replace_generation > generation:
                log.warning(
                    "context-overflow compaction failed after durable surface progress: %s; "
                    "retrying from the replacement surface",
                    exc,
                )
                return RETRY
            consequence = "cancellation prevents retry" if _aborted(signal) else "preserving the original request error"
            log.warning("context-overflow compaction failed: %s; %s", exc, consequence)
            return FAIL
        # Only a changed surface proves progress; cancellation wins even over a success.
        if _aborted(signal) or surface.replace_generation == generation:
            return FAIL
        if result is not None:
            log.info("compaction (context overflow recovery): %s", _describe(result))
        return RETRY


def _describe(result: CompactionResult) -> str:
    start, end = result.shadowed_range
    return (
        f"shadowed {len(result.shadowed_seqs)} surface nodes "
        f"(seqs {start}-{end}, ~{result.shadowed_token_count} tokens)"
    )


def _aborted(signal: asyncio.Event | None) -> bool:
    return signal is not None and signal.is_set()


def _code(failure: object) -> object:
    if isinstance(failure, Mapping):
        return failure.get("code")
    return getattr(failure, "code", None)
