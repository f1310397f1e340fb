"""`compact_if_needed` (pressure and overflow) and manual `compact_now`."""

from __future__ import annotations

import asyncio

import pytest

from dsh_compact.config import TargetPressureConfigError, load_compact_config
from dsh_compact.errors import CompactionError
from dsh_compact.meter import TokenMeter
from dsh_compact.service import CompactionService
from dsh_compact.targets import CompactAgent, ModelTarget
from dsh_host.session.frozen import thaw


class CountingMeter(TokenMeter):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def measure(self, session):
        self.calls += 1
        return super().measure(session)


def make(summarizer, capacity=1000, flush=None, default_target=None, meter=None, **table) -> CompactionService:
    table = {"threshold_ratio": 0.5, "retain_tokens": 180, **table}
    lookup = capacity if callable(capacity) else (lambda target: capacity)
    return CompactionService(
        load_compact_config(table),
        summarizer=summarizer,
        capacity=lookup,
        meter=meter,
        default_target=default_target,
        flush=flush,
    )


# --- pressure -------------------------------------------------------------------------------------


async def test_a_headerless_session_is_left_alone(fx) -> None:
    session = fx.new_session()
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    for i in range(20):
        fx.user(session, "x" * 400 + str(i))
    stub = fx.StubSummarizer()
    assert await make(stub).compact_if_needed(session, "pressure") is None
    assert await make(stub).compact_if_needed(session, "context-overflow") is None
    assert stub.calls == []


async def test_below_the_threshold_nothing_happens(fx) -> None:
    session = fx.conversation(2)
    stub = fx.StubSummarizer()
    assert await make(stub).compact_if_needed(session, "pressure") is None
    assert stub.calls == []
    assert "compact/start" not in [e.type for e in session.events]


async def test_above_the_threshold_it_compacts(fx) -> None:
    session = fx.conversation(4)
    result = await make(fx.StubSummarizer()).compact_if_needed(session, "pressure")
    assert result is not None and len(result.shadowed_seqs) > 2
    assert len(session.surface.nodes) < 8


async def test_one_measurement_decides(fx) -> None:
    session = fx.conversation(4)
    meter = CountingMeter()
    seen: list[int] = []
    stub = fx.StubSummarizer(during=lambda s: seen.append(meter.calls))
    await make(stub, meter=meter).compact_if_needed(session, "pressure")
    # One measurement to decide, one lock snapshot inside the transaction.
    assert seen == [2]


async def test_a_large_envelope_without_a_compactable_range(fx) -> None:
    empty = fx.new_session()
    empty.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    empty.append("request/header", fx.header_data(system="s" * 100_000))
    stub = fx.StubSummarizer()
    assert await make(stub).compact_if_needed(empty, "pressure") is None
    one = fx.conversation(0)
    one.append("request/header", fx.header_data(system="s" * 100_000))
    fx.user(one, "only one node")
    assert await make(stub).compact_if_needed(one, "pressure") is None
    assert stub.calls == []


async def test_still_above_the_threshold_after_the_allowed_attempts(fx) -> None:
    session = fx.conversation(4)
    stub = fx.StubSummarizer(blocks=[fx.text("small checkpoint")] * 7)
    with pytest.raises(CompactionError) as info:
        await make(stub, threshold_ratio=0.3, compaction_retries=0).compact_if_needed(session, "pressure")
    assert str(info.value) == (
        "compaction still above threshold after 1 compaction attempts (335 estimated tokens >= threshold 300)"
    )
    assert session.surface.replace_generation == 1  # the one attempt still landed


async def test_retries_compact_again_while_a_range_remains(fx) -> None:
    session = fx.conversation(4)
    fx.user(session, fx.padded("one more", 326))
    stub = fx.StubSummarizer(blocks=[fx.text("small checkpoint")] * 7)

    def shrink_the_second_summary(_session):
        if len(stub.calls) == 2:
            stub.blocks = [fx.text("small checkpoint")]

    stub.during = shrink_the_second_summary
    # threshold 300; the tail (seqs 22 and the new user message) costs 181.
    first_total = 154 + 181
    assert first_total >= 300
    service = make(stub, threshold_ratio=0.3, compaction_retries=1)
    result = await service.compact_if_needed(session, "pressure")
    assert result is not None
    assert len(stub.calls) == 2
    # The second attempt compacted the first checkpoint alone into a smaller one.
    assert result.shadowed_seqs == (session.surface.nodes[0] - 4,)
    assert service.meter.measure(session).total_tokens == 106 + 181
    assert session.surface.replace_generation == 2


async def test_tool_pairs_survive_pressure_compaction(fx) -> None:
    session = fx.tool_conversation(4)
    result = await make(fx.StubSummarizer(), capacity=4000, threshold_ratio=0.1, retain_tokens=80).compact_if_needed(
        session, "pressure"
    )
    assert result is not None
    calls_seen: set[str] = set()
    for message in session.derive_messages():
        for block in message["content"]:
            if block["type"] == "tool-call":
                calls_seen.add(block["id"])
            elif block["type"] == "tool-result":
                assert block["toolCallId"] in calls_seen


async def test_capacity_is_resolved_per_target_on_every_check(fx) -> None:
    windows = {"large": 10_000, "small": 1000}
    session = fx.conversation(4, header=fx.header_data("large", "same"))
    service = make(fx.StubSummarizer(), capacity=lambda target: windows[target.provider])
    assert await service.compact_if_needed(session, "pressure") is None
    session.append("request/header", {"header": {"config": {"provider": "small", "model": "same"}}, "reason": "change"})
    assert await service.compact_if_needed(session, "pressure") is not None


async def test_the_configured_window_overrides_the_adapter(fx) -> None:
    session = fx.conversation(4)
    service = make(fx.StubSummarizer(), capacity=None, context_window=1000)
    assert await service.compact_if_needed(session, "pressure") is not None


async def test_unknown_capacity(fx) -> None:
    session = fx.conversation(4)
    service = make(fx.StubSummarizer(), capacity=None)
    with pytest.raises(TargetPressureConfigError) as info:
        await service.compact_if_needed(session, "pressure")
    assert info.value.target_key == "M/M"
    assert "no context capacity for M/M" in str(info.value)
    # Overflow recovery does not need capacity.
    assert await service.compact_if_needed(session, "context-overflow") is not None


async def test_colliding_budgets_are_a_target_error(fx) -> None:
    with pytest.raises(
        TargetPressureConfigError, match=r"retain_tokens \(500\) must be less than threshold tokens 500"
    ):
        await make(fx.StubSummarizer(), retain_tokens=500).compact_if_needed(fx.conversation(4), "pressure")


async def test_an_unknown_trigger(fx) -> None:
    with pytest.raises(ValueError, match="unknown compaction trigger"):
        await make(fx.StubSummarizer()).compact_if_needed(fx.conversation(4), "whenever")  # type: ignore[arg-type]


# --- overflow -------------------------------------------------------------------------------------


async def test_overflow_keeps_only_the_newest_balanced_tail(fx) -> None:
    session = fx.conversation(2)  # far below any threshold: overflow ignores it
    result = await make(fx.StubSummarizer()).compact_if_needed(session, "context-overflow")
    assert result is not None
    assert session.surface.nodes == [result.checkpoint_seq, 10]


async def test_overflow_on_a_tool_conversation_keeps_the_newest_pair(fx) -> None:
    session = fx.new_session()
    fx.conversation(1, session=session)
    fx.user(session, fx.padded("go", 300))
    call = fx.assistant(session, 2, 1, [{"type": "tool-call", "id": "c9", "name": "read", "arguments": "{}"}])
    result_seq = fx.tool_result(session, 2, 1, "c9", "x" * 300)
    result = await make(fx.StubSummarizer()).compact_if_needed(session, "context-overflow")
    assert result is not None
    assert session.surface.nodes == [result.checkpoint_seq, call, result_seq]


# --- manual ---------------------------------------------------------------------------------------


async def test_compact_now_on_an_idle_session_brackets_its_own_turn(fx) -> None:
    session = fx.conversation(4)
    session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
    flushed: list[int] = []

    async def flush(s):
        flushed.append(s.seq)

    before = session.seq
    result = await make(fx.StubSummarizer(), flush=flush).compact_now(session)
    assert result is not None
    events = session.events[before:]
    assert [e.type for e in events] == [
        "turn/start",
        "compact/start",
        "compact/summary",
        "user/message",
        "compact/end",
        "turn/end",
    ]
    assert thaw(events[0].data) == {"turn": 6, "trigger": {"kind": "compact", "source": {"kind": "user"}}}
    assert thaw(events[-1].data) == {"turn": 6, "reason": {"kind": "completed"}}
    assert events[1].data == {"turn": 6}
    assert flushed == [session.seq]
    assert session.surface.nodes == [result.checkpoint_seq, 20, 22]


async def test_compact_now_ignores_the_threshold_but_keeps_the_retained_tail(fx) -> None:
    session = fx.conversation(2)  # 362 tokens: no pressure
    result = await make(fx.StubSummarizer()).compact_now(session)
    assert result is not None and result.shadowed_seqs == (1, 4)
    assert session.events[-1].type == "compact/end"  # inside the open turn: no turn of its own


async def test_compact_now_retain_budget(fx) -> None:
    session = fx.conversation(4)
    result = await make(fx.StubSummarizer()).compact_now(session, retain_tokens=0)
    assert result is not None and session.surface.nodes == [result.checkpoint_seq, 22]


async def test_compact_now_scales_a_retain_ratio_by_the_window(fx) -> None:
    service = CompactionService(
        load_compact_config({"retain_ratio": 0.2}),  # 0.2 x 1000 = 200 tokens kept
        summarizer=fx.StubSummarizer(),
        capacity=lambda target: 1000,
    )
    session = fx.conversation(4)
    result = await service.compact_now(session)
    assert result is not None and session.surface.nodes == [result.checkpoint_seq, 16, 20, 22]


async def test_compact_now_with_nothing_to_compact_writes_nothing(fx) -> None:
    session = fx.conversation(1)
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    before = session.seq
    assert await make(fx.StubSummarizer()).compact_now(session) is None
    assert session.seq == before


async def test_compact_now_failure_ends_its_turn_with_the_error(fx) -> None:
    session = fx.conversation(4)
    session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
    flushed: list[int] = []

    async def flush(s):
        flushed.append(s.seq)

    stub = fx.StubSummarizer(error=RuntimeError("summary unavailable"))
    with pytest.raises(RuntimeError):
        await make(stub, flush=flush).compact_now(session)
    assert [e.type for e in session.events[-3:]] == ["compact/start", "compact/end", "turn/end"]
    assert thaw(session.events[-1].data) == {
        "turn": 6,
        "reason": {"kind": "error", "step": 0, "message": "summary unavailable"},
    }
    assert flushed == [session.seq]


async def test_compact_now_cancelled_ends_its_turn_aborted(fx) -> None:
    session = fx.conversation(4)
    session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
    signal = asyncio.Event()

    def abort(_session):
        signal.set()
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await make(fx.StubSummarizer(during=abort)).compact_now(session, signal=signal)
    assert thaw(session.events[-1].data) == {"turn": 6, "reason": {"kind": "aborted"}}


async def test_compact_now_falls_back_to_the_configured_model(fx) -> None:
    session = fx.new_session()
    for i in range(3):
        fx.user(session, f"message {i} " + "x" * 300)
    stub = fx.StubSummarizer()
    await make(stub, default_target=lambda: ModelTarget("scripted", "scripted")).compact_now(session, retain_tokens=0)
    agent = stub.calls[0][1]
    assert agent == CompactAgent(session, ModelTarget("scripted", "scripted"))


async def test_compact_now_keeps_an_agent_model(fx) -> None:
    class FakeAgent:
        def __init__(self, session):
            self.session = session
            self.provider, self.model = "agent-provider", "agent-model"

    session = fx.conversation(4)
    stub = fx.StubSummarizer()
    await make(stub, default_target=lambda: ModelTarget("x", "y")).compact_now(FakeAgent(session))
    assert stub.calls[0][1].fallback == ModelTarget("agent-provider", "agent-model")
