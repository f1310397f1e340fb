"""The compaction transaction: the exact log of a compaction, pre-lock checks, failures, repetition."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from dsh_compact.config import load_compact_config
from dsh_compact.errors import CompactionError
from dsh_compact.meter import TokenMeter
from dsh_compact.service import CompactionService
from dsh_compact.summarizer import CHECKPOINT_PREAMBLE, frame
from dsh_compact.targets import CompactAgent
from dsh_compact.transaction import CompactionResult, inspect_turn_tail
from dsh_host.session.frozen import thaw
from dsh_host.session.session import Session
from dsh_host.session.surface import classify

CALL = {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}


def service_for(
    summarizer, *, window: int | None = 1000, meter: TokenMeter | None = None, **table
) -> CompactionService:
    table = {"threshold_ratio": 0.5, "retain_tokens": 180, **table}
    return CompactionService(
        load_compact_config(table), summarizer=summarizer, capacity=lambda target: window, meter=meter
    )


def log_tail(session: Session, start: int) -> list[dict]:
    return [{k: v for k, v in thaw(e.to_json()).items() if k != "time"} for e in session.events[start:]]


async def test_a_compaction_logs_start_summary_checkpoint_and_end(fx) -> None:
    session = fx.conversation(4)
    assert session.surface.nodes == [1, 4, 8, 10, 14, 16, 20, 22]
    stub = fx.StubSummarizer()
    service = service_for(stub)
    result = await service.compact_if_needed(session, "pressure", None)
    assert log_tail(session, 26) == [
        {"type": "compact/start", "seq": 26, "data": {"turn": 5}},
        {
            "type": "compact/summary",
            "seq": 27,
            "data": {
                "summary": [{"type": "text", "text": "small checkpoint"}],
                "shadowedRange": {"start": 1, "end": 16},
                "shadowedSeqs": [1, 4, 8, 10, 14, 16],
                "shadowedTokenCount": 543,
                "provider": "summary-provider",
                "model": "summary-model",
                "maxTokens": 123,
            },
        },
        {
            "type": "user/message",
            "seq": 28,
            "data": {
                "content": [
                    {"type": "text", "text": CHECKPOINT_PREAMBLE + "\n\n<compacted-summary>"},
                    {"type": "text", "text": "small checkpoint"},
                    {"type": "text", "text": "</compacted-summary>"},
                ],
                "source": {"kind": "plugin", "plugin": "compact"},
            },
            "sourceEventSeqs": [26, 27, 1, 4, 8, 10, 14, 16],
            "surfaceOp": {"op": "replace", "start": 1, "end": 16},
        },
        {"type": "compact/end", "seq": 29, "data": {"turn": 5}},
    ]
    # The key order of the checkpoint line is the reference's: type, seq, time, data, sources, op.
    assert list(json.loads(session.event(28).to_line())) == [
        "type",
        "seq",
        "time",
        "data",
        "sourceEventSeqs",
        "surfaceOp",
    ]
    assert session.surface.nodes == [28, 20, 22]
    assert session.surface.replace_generation == 1
    assert service.meter.measure(session).total_tokens == 106 + 90 + 91 == 287
    assert result == CompactionResult(
        start_seq=26,
        summary_seq=27,
        checkpoint_seq=28,
        end_seq=29,
        summary=({"type": "text", "text": "small checkpoint"},),
        shadowed_range=(1, 16),
        shadowed_seqs=(1, 4, 8, 10, 14, 16),
        shadowed_token_count=543,
    )
    assert result.start_seq < result.summary_seq < result.end_seq
    assert [e.type for e in session.events if e.type.startswith("compact/")] == [
        "compact/start",
        "compact/summary",
        "compact/end",
    ]
    assert session.event(26).surface_op is None
    # Shadowed events stay in the log; replaying it reproduces the same messages.
    kinds = classify(session.events)
    assert [s for s, k in kinds.items() if k == "shadowed"] == [1, 4, 8, 10, 14, 16]
    replayed = Session(session.header, session.events)
    assert replayed.derive_messages() == session.derive_messages()
    assert replayed.surface.replace_generation == 1


async def test_region_of_three_turns(fx) -> None:
    session = fx.conversation(3)
    stub = fx.StubSummarizer()
    signal = asyncio.Event()
    result = await service_for(stub).compact_region(session, 1, 10, signal)
    assert result.shadowed_seqs == tuple(session.event(result.summary_seq).data["shadowedSeqs"]) == (1, 4, 8, 10)
    (request, agent, forwarded), *_ = stub.calls
    assert forwarded is signal
    assert agent.session is session
    assert "fixture user 1" in json.dumps(request.messages)
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user", "assistant"]
    summary = session.event(result.summary_seq).data
    assert (summary["provider"], summary["model"], summary["maxTokens"]) == (
        "summary-provider",
        "summary-model",
        123,
    )
    first = session.derive_messages()[0]
    assert "<compacted-summary>" in first["content"][0]["text"]
    assert first["content"][-1] == {"type": "text", "text": "</compacted-summary>"}
    assert Session(session.header, session.events).derive_messages() == session.derive_messages()


async def test_summary_without_max_tokens_omits_the_key(fx) -> None:
    session = fx.conversation(3)
    result = await service_for(fx.StubSummarizer(max_tokens=None)).compact_region(session, 1, 10)
    assert "maxTokens" not in session.event(result.summary_seq).data


async def test_summarizer_input_replays_the_routed_header(fx) -> None:
    tools = [{"name": "read", "description": "Read a file", "parameters": {"type": "object"}}]
    prefix = [{"role": "user", "content": [fx.text("session prefix")]}]
    session = fx.conversation(2, header=fx.header_data(system="be brief", tools=tools, messagePrefix=prefix))
    stub = fx.StubSummarizer()
    await service_for(stub).compact_region(session, 1, 4)
    request = stub.calls[0][0]
    assert request.system == "be brief"
    assert thaw(list(request.tools)) == tools
    assert thaw(request.messages[0]) == prefix[0]
    assert len(request.messages) == 3


def _rejections(fx):
    def closed():
        session = fx.conversation(2)
        session.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
        return session, 1, 4, "compactRegion: no open turn — compaction events must be enclosed in a turn"

    def turnless():
        session = fx.new_session()
        a, b = fx.user(session, "one"), fx.user(session, "two")
        return session, a, b, "no open turn"

    def in_progress():
        session = fx.conversation(2)
        session.append("compact/start", {"turn": 3})
        return session, 1, 4, "compaction already in progress"

    def tool_session():
        session = fx.conversation(1)
        u = fx.user(session, "go")
        a = fx.assistant(session, 2, 1, [CALL])
        r = fx.tool_result(session, 2, 1, "c1", "out")
        return session, u, a, r

    def unbalanced_start():
        session, _, _, r = tool_session()
        return session, r, r, f"compactRegion: start seq {r} is not a balanced boundary (would split a step's"

    def unbalanced_end():
        session, u, a, _ = tool_session()
        return session, u, a, f"compactRegion: end seq {a} is not a balanced boundary (would split a step, or"

    return {
        "start missing": lambda: (
            fx.conversation(2),
            9001,
            4,
            "compactRegion: start seq 9001 not found in surface",
        ),
        "end missing": lambda: (
            fx.conversation(2),
            1,
            9002,
            "compactRegion: end seq 9002 not found in surface",
        ),
        "shadowed start": lambda: (
            fx.conversation(2),
            2,
            4,
            "compactRegion: start seq 2 not found in surface",
        ),
        "reversed": lambda: (
            fx.conversation(2),
            8,
            4,
            "compactRegion: start seq 8 (position 2) is after end seq 4 (position 1) on the surface",
        ),
        "unbalanced start": unbalanced_start,
        "unbalanced end": unbalanced_end,
        "closed turn": closed,
        "turnless": turnless,
        "in progress": in_progress,
    }


@pytest.mark.parametrize(
    "case",
    [
        "start missing",
        "end missing",
        "shadowed start",
        "reversed",
        "unbalanced start",
        "unbalanced end",
        "closed turn",
        "turnless",
        "in progress",
    ],
)
async def test_pre_lock_rejections_write_nothing(fx, case: str) -> None:
    session, start, end, message = _rejections(fx)[case]()
    before = session.seq
    stub = fx.StubSummarizer()
    with pytest.raises(CompactionError) as info:
        await service_for(stub).compact_region(session, start, end)
    assert message in str(info.value)
    assert session.seq == before
    assert stub.calls == []


async def test_in_progress_is_checked_before_the_open_turn(fx) -> None:
    session = fx.conversation(2)
    session.append("compact/start", {"turn": 3})
    session.append("turn/end", {"turn": 3, "reason": {"kind": "interrupted"}})
    session.append("turn/start", {"turn": 4, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    # The orphan belongs to an earlier turn: it is inert.
    assert inspect_turn_tail(session).compacting is False
    await service_for(fx.StubSummarizer()).compact_region(session, 1, 4)


async def test_a_crashed_start_never_blocks_a_later_compaction(fx) -> None:
    session = fx.conversation(2)
    session.append("compact/start", {"turn": 3})  # the process died here
    session.append("turn/end", {"turn": 3, "reason": {"kind": "interrupted"}})  # crash repair
    session.append("turn/start", {"turn": 4, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    fx.user(session, "again")
    result = await service_for(fx.StubSummarizer()).compact_region(session, 1, 8)
    assert session.event(result.end_seq).data == {"turn": 4}


async def test_an_ended_compaction_in_the_open_turn_frees_the_lock(fx) -> None:
    session = fx.conversation(2)
    session.append("compact/start", {"turn": 3})
    session.append("compact/end", {"turn": 3, "error": "earlier failure"})
    await service_for(fx.StubSummarizer()).compact_region(session, 1, 4)


async def test_the_lock_snapshot_must_match_the_selection(fx) -> None:
    class DroppingMeter(TokenMeter):
        def measure(self, session):
            measurement = super().measure(session)
            return dataclasses.replace(measurement, nodes=measurement.nodes[1:])

    session = fx.conversation(2)
    stub = fx.StubSummarizer()
    with pytest.raises(CompactionError, match="compaction: selected surface changed before summarization began"):
        await service_for(stub, meter=DroppingMeter()).compact_region(session, 1, 4)
    assert [e.type for e in session.events[-2:]] == ["compact/start", "compact/end"]
    assert stub.calls == []


async def test_summarizer_failure_is_logged_and_reraised(fx) -> None:
    session = fx.conversation(2)
    nodes = list(session.surface.nodes)
    stub = fx.StubSummarizer(error=RuntimeError("summary unavailable"))
    with pytest.raises(RuntimeError, match="summary unavailable"):
        await service_for(stub).compact_region(session, 1, 4)
    assert session.surface.nodes == nodes
    assert session.surface.replace_generation == 0
    start, end = session.events[-2:]
    assert (start.type, thaw(start.data)) == ("compact/start", {"turn": 3})
    assert (end.type, thaw(end.data)) == ("compact/end", {"turn": 3, "error": "summary unavailable"})


async def test_cancellation_releases_the_lock(fx) -> None:
    session = fx.conversation(2)
    stub = fx.StubSummarizer(error=asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await service_for(stub).compact_region(session, 1, 4)
    assert thaw(session.events[-1].data) == {"turn": 3, "error": "CancelledError"}
    assert inspect_turn_tail(session).compacting is False


async def test_log_only_appends_during_summarization_are_tolerated(fx) -> None:
    session = fx.conversation(2)

    def log_header(s):
        s.append("request/header", fx.header_data(system="changed"))

    await service_for(fx.StubSummarizer(during=log_header)).compact_region(session, 1, 4)
    assert session.events[-1].type == "compact/end"
    assert "error" not in session.events[-1].data


async def test_a_surface_append_during_summarization_fails_the_compaction(fx) -> None:
    session = fx.conversation(2)

    def inject(s):
        s.append(
            "context/message",
            {"content": [fx.text("late")], "source": {"kind": "plugin", "plugin": "x"}},
            surface_op="append",
        )

    with pytest.raises(CompactionError, match="compaction: session surface changed during summarization"):
        await service_for(fx.StubSummarizer(during=inject)).compact_region(session, 1, 4)
    types = [e.type for e in session.events[-3:]]
    assert types == ["compact/start", "context/message", "compact/end"]
    assert "compact/summary" not in [e.type for e in session.events]


async def test_the_turn_must_stay_open_during_summarization(fx) -> None:
    session = fx.conversation(2)

    def end_turn(s):
        s.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})

    with pytest.raises(CompactionError, match="compaction: turn 3 ended during summarization"):
        await service_for(fx.StubSummarizer(during=end_turn)).compact_region(session, 1, 4)
    assert "compact/summary" not in [e.type for e in session.events]
    assert session.surface.replace_generation == 0


async def test_a_summary_that_is_not_smaller_is_refused(fx) -> None:
    session = fx.conversation(2)
    big = [fx.text(f"block {i}") for i in range(100)]
    with pytest.raises(CompactionError) as info:
        await service_for(fx.StubSummarizer(blocks=big)).compact_region(session, 1, 4)
    framed = TokenMeter.estimate_message({"role": "user", "content": frame(big)})
    assert str(info.value) == (
        f"summary is not smaller than the shadowed content ({framed} estimated framed tokens >= 181)"
    )
    assert [e.type for e in session.events[-2:]] == ["compact/start", "compact/end"]
    assert "compact/summary" not in [e.type for e in session.events]


async def test_repeated_compaction_keeps_one_checkpoint_lineage(fx) -> None:
    session = fx.conversation(4)
    service = service_for(fx.StubSummarizer())
    first = await service.compact_if_needed(session, "pressure", None)
    assert first is not None
    # More conversation in the open turn, enough to be under pressure again.
    for i in range(3):
        fx.user(session, fx.padded(f"later user {i}", 326))
        fx.assistant(session, 5, i + 1, [fx.text(fx.padded(f"later assistant {i}", 331))])
    second = await service.compact_if_needed(session, "pressure", None)
    assert second is not None
    # The second compaction is anchored at the head: it merges the first checkpoint.
    assert second.shadowed_seqs[0] == first.checkpoint_seq
    assert second.shadowed_range[0] == first.checkpoint_seq
    nodes = session.surface.nodes
    assert nodes[0] == second.checkpoint_seq
    checkpoints = [s for s in nodes if session.event(s).data.get("source") == {"kind": "plugin", "plugin": "compact"}]
    assert checkpoints == [second.checkpoint_seq]
    kinds = classify(session.events)
    assert kinds[first.checkpoint_seq] == "shadowed"
    for seq in first.shadowed_seqs:
        assert kinds[seq] == "shadowed"
        assert session.event(seq).type in ("user/message", "assistant/message")
    assert session.surface.replace_generation == 2
    assert Session(session.header, session.events).derive_messages() == session.derive_messages()
    assert service.meter.measure(session).total_tokens < 500


async def test_compact_agent_carries_the_session(fx) -> None:
    session = fx.conversation(2)
    stub = fx.StubSummarizer()
    await service_for(stub).compact_region(CompactAgent(session), 1, 4)
    assert stub.calls[0][1] == CompactAgent(session)
