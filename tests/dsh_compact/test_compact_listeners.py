"""The automatic triggers as hook implementations, called directly with a stand-in agent."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from dsh_compact.config import load_compact_config
from dsh_compact.listeners import AutoCompaction
from dsh_compact.service import CompactionService
from dsh_compact.transaction import CompactionResult
from dsh_host.asyncs import resolve

OVERFLOW = {"message": "context too long", "code": "CONTEXT_WINDOW_EXCEEDED"}


def auto(summarizer, window=1000, **table) -> AutoCompaction:
    table = {"threshold_ratio": 0.5, "retain_tokens": 180, **table}
    service = CompactionService(load_compact_config(table), summarizer=summarizer, capacity=lambda target: window)
    return AutoCompaction(service)


def agent_of(session) -> SimpleNamespace:
    return SimpleNamespace(session=session, provider="M", model="M")


async def post_step(listener: AutoCompaction, session, signal=None) -> None:
    await listener.dsh_agent_post_step(agent=agent_of(session), turn=1, step=1, signal=signal)


async def request_error(listener: AutoCompaction, session, failure=OVERFLOW, prior=(), signal=None):
    return await resolve(
        listener.dsh_agent_request_error(
            agent=agent_of(session),
            turn=1,
            step=1,
            error=RuntimeError(failure["message"]),
            failure=failure,
            prior_failures=list(prior),
            signal=signal,
        )
    )


class SpyService:
    """Stands in for the service: counts calls and answers from a canned function."""

    def __init__(self, config, answer=None) -> None:
        self.config = config
        self.calls: list[str] = []
        self.answer = answer

    async def compact_if_needed(self, agent, trigger, signal=None):
        self.calls.append(trigger)
        return self.answer(agent, signal) if self.answer else None


# --- post-step pressure ---------------------------------------------------------------------------


async def test_post_step_compacts_under_pressure(fx, caplog) -> None:
    session = fx.conversation(4)
    with caplog.at_level(logging.INFO, logger="dsh.compact"):
        await post_step(auto(fx.StubSummarizer()), session)
    assert "compact/summary" in [e.type for e in session.events]
    assert "compaction (post-step pressure): shadowed 6 surface nodes (seqs 1-16, ~543 tokens)" in caplog.text


async def test_post_step_without_pressure_does_nothing(fx) -> None:
    session = fx.conversation(1)
    await post_step(auto(fx.StubSummarizer()), session)
    assert "compact/start" not in [e.type for e in session.events]


async def test_post_step_with_an_aborted_signal_does_not_look(fx) -> None:
    spy = SpyService(load_compact_config({}))
    signal = asyncio.Event()
    signal.set()
    await AutoCompaction(spy).dsh_agent_post_step(agent=None, turn=1, step=1, signal=signal)
    assert spy.calls == []


async def test_post_step_failures_warn_and_continue(fx, caplog) -> None:
    session = fx.conversation(4)
    stub = fx.StubSummarizer(error=RuntimeError("temporary failure"))
    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        await post_step(auto(stub), session)
    assert "post-step compaction failed: temporary failure; continuing the turn" in caplog.text


async def test_missing_capacity_warns_once_per_target(fx, caplog) -> None:
    listener = auto(fx.StubSummarizer(), window=None)
    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        await post_step(listener, fx.conversation(4))
        await post_step(listener, fx.conversation(4))
    assert len(caplog.records) == 1
    assert "no context capacity for M/M" in caplog.records[0].getMessage()


async def test_colliding_budgets_warn_once(fx, caplog) -> None:
    listener = auto(fx.StubSummarizer(), retain_tokens=500)
    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        for _ in range(3):
            await post_step(listener, fx.conversation(4))
    assert len(caplog.records) == 1
    assert "retain_tokens (500) must be less than threshold tokens 500" in caplog.records[0].getMessage()


# --- context-overflow recovery --------------------------------------------------------------------


async def test_overflow_compacts_and_retries(fx, caplog) -> None:
    session = fx.conversation(4)
    newest = session.surface.nodes[-1]
    listener = auto(fx.StubSummarizer(), window=10_000, threshold_ratio=1.0, retain_tokens=900)
    with caplog.at_level(logging.INFO, logger="dsh.compact"):
        assert await request_error(listener, session) == "retry"
    assert session.surface.replace_generation == 1
    assert session.surface.nodes[-1] == newest
    assert "compaction (context overflow recovery): shadowed" in caplog.text


async def test_overflow_on_a_tool_conversation_keeps_the_newest_pair_balanced(fx) -> None:
    session = fx.tool_conversation(3)
    assert await request_error(auto(fx.StubSummarizer(), retain_tokens=90), session) == "retry"
    nodes = session.surface.nodes
    kinds = [session.event(s).type for s in nodes]
    # The newest step (an answer) stays; the checkpoint before it is balanced on both sides.
    assert kinds[0] == "user/message" and kinds[-1] == "assistant/message"
    assert "tool/result" not in kinds[1:]


async def test_overflow_summarizer_failure_keeps_the_original_error(fx, caplog) -> None:
    session = fx.conversation(4)
    stub = fx.StubSummarizer(error=RuntimeError("no summary"))
    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        assert await request_error(auto(stub), session) == "fail"
    assert "context-overflow compaction failed: no summary; preserving the original request error" in caplog.text


async def test_overflow_cancelled_during_summarization(fx, caplog) -> None:
    session = fx.conversation(4)
    signal = asyncio.Event()

    def abort(_session):
        signal.set()
        raise RuntimeError("aborted")

    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        decision = await request_error(auto(fx.StubSummarizer(during=abort)), session, signal=signal)
    assert decision == "fail"
    assert "cancellation prevents retry" in caplog.text


async def test_durable_progress_before_a_failure_still_retries(fx, caplog) -> None:
    session = fx.conversation(4)
    checkpoint = {"content": [fx.text("earlier")], "source": {"kind": "plugin", "plugin": "compact"}}

    def replace_then_fail(agent, signal):
        agent.session.append(
            "user/message", checkpoint, surface_op={"op": "replace", "start": 1, "end": 4}, sources=[1, 4]
        )
        raise RuntimeError("summary failed after a prune")

    spy = SpyService(load_compact_config({}), answer=replace_then_fail)
    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        assert await request_error(AutoCompaction(spy), session) == "retry"
    assert "retrying from the replacement surface" in caplog.text


async def test_abort_after_a_successful_compaction_fails(fx) -> None:
    session = fx.conversation(4)
    signal = asyncio.Event()
    stub = fx.StubSummarizer(during=lambda _session: signal.set())
    assert await request_error(auto(stub), session, signal=signal) == "fail"
    assert session.surface.replace_generation == 1  # the compaction landed; cancellation still wins


async def test_a_result_without_a_replacement_cannot_retry(fx) -> None:
    session = fx.conversation(4)
    fake = CompactionResult(1, 2, 3, 4, (), (1, 4), (1, 4), 10)
    spy = SpyService(load_compact_config({}), answer=lambda agent, signal: fake)
    assert await request_error(AutoCompaction(spy), session) == "fail"


@pytest.mark.parametrize(
    ("failure", "prior", "aborted"),
    [
        ({"message": "slow down", "code": "RATE_LIMIT"}, (), False),
        (OVERFLOW, (OVERFLOW,), False),
        (OVERFLOW, (), True),
    ],
)
async def test_overflow_recovery_abstains(fx, failure, prior, aborted) -> None:
    spy = SpyService(load_compact_config({}))
    signal = asyncio.Event()
    if aborted:
        signal.set()
    decision = await request_error(AutoCompaction(spy), fx.conversation(4), failure, prior, signal)
    assert decision is None
    assert spy.calls == []


async def test_a_headerless_overflow_abstains(fx) -> None:
    session = fx.new_session()
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    fx.user(session, "one")
    fx.user(session, "two")
    assert await request_error(auto(fx.StubSummarizer()), session) is None


async def test_the_abstention_is_synchronous(fx) -> None:
    # pluggy's firstresult stops at the first non-None value: abstaining must not be a coroutine.
    listener = auto(fx.StubSummarizer())
    result = listener.dsh_agent_request_error(
        agent=agent_of(fx.conversation(4)),
        turn=1,
        step=1,
        error=RuntimeError("x"),
        failure={"message": "x", "code": "RATE_LIMIT"},
        prior_failures=[],
        signal=None,
    )
    assert result is None


async def test_a_model_policy_overrides_the_overflow_budget(fx) -> None:
    table = {
        "max_overflow_retries": 2,
        "model_policies": [{"provider": "M", "model": "M", "max_overflow_retries": 1}],
    }
    spy = SpyService(load_compact_config(table))
    assert await request_error(AutoCompaction(spy), fx.conversation(4), prior=(OVERFLOW,)) is None
    spy.config = load_compact_config({"max_overflow_retries": 2})
    await request_error(AutoCompaction(spy), fx.conversation(4), prior=(OVERFLOW,))
    assert spy.calls == ["context-overflow"]


async def test_zero_overflow_retries_disables_recovery_only(fx) -> None:
    listener = auto(fx.StubSummarizer(), max_overflow_retries=0)
    session = fx.conversation(4)
    assert await request_error(listener, session) is None
    await post_step(listener, session)
    assert session.surface.replace_generation == 1


async def test_an_unlisted_routed_model_still_recovers(fx) -> None:
    table = {"model_policies": [{"provider": "other", "model": "x", "max_overflow_retries": 0}]}
    assert await request_error(auto(fx.StubSummarizer(), **table), fx.conversation(4)) == "retry"
