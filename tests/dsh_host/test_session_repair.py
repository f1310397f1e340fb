"""Crash repair (closing the turn a crash left open) and resume through the host."""

from __future__ import annotations

import json

import pytest

from dsh_host import DshError
from dsh_host.session.events import SessionHeader, event_from_json
from dsh_host.session.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT, interrupted_turn_closers
from dsh_host.session.session import Session

OUTCOME_UNKNOWN = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome "
    "is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only "
    "or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry "
    "blindly."
)
NOT_STARTED = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."


def turn_start(L, seq, turn=1, time=0):
    return L.raw("turn/start", seq, {"turn": turn, "trigger": {"kind": "message", "source": L.USER}}, time=time)


def turn_end(L, seq, turn=1, kind="completed"):
    return L.raw("turn/end", seq, {"turn": turn, "reason": {"kind": kind}})


def step(L, kind, seq, turn=1, step=1):
    return L.raw(kind, seq, {"turn": turn, "step": step})


def calling(L, seq, *call_ids, turn=1, step=1, time=0):
    content = [{"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in call_ids]
    data = {"turn": turn, "step": step, "content": content, "provenance": L.PROVENANCE}
    return L.raw("assistant/message", seq, data, op="append", time=time)


def tool_call(L, seq, call_id, turn=1, step=1, time=0):
    data = {"turn": turn, "step": step, "callId": call_id, "name": "read", "arguments": "{}"}
    return L.raw("tool/call", seq, data, time=time)


def closers_for(raws):
    return interrupted_turn_closers([event_from_json(r) for r in raws])


def test_the_recovery_texts_are_exact():
    assert OUTCOME_UNKNOWN_TEXT == OUTCOME_UNKNOWN
    assert NOT_STARTED_TEXT == NOT_STARTED


def test_a_balanced_or_empty_log_needs_no_closers(log_builder):
    L = log_builder
    assert closers_for([]) == []
    assert closers_for([turn_start(L, 0), L.user(1), turn_end(L, 2)]) == []
    assert closers_for([L.raw("session/title", 0, {"title": "t"})]) == []


def test_an_open_turn_only_gets_turn_end_interrupted(log_builder):
    L = log_builder
    raws = [turn_start(L, 0), L.user(1), turn_end(L, 2), turn_start(L, 3, turn=2, time=77)]
    assert closers_for(raws) == [
        {"type": "turn/end", "seq": 4, "time": 77, "data": {"turn": 2, "reason": {"kind": "interrupted"}}}
    ]


def test_an_open_step_is_closed_before_the_turn(log_builder):
    L = log_builder
    raws = [turn_start(L, 0), L.user(1), step(L, "step/start", 2), L.raw("request/header", 3, {}, time=9)]
    assert closers_for(raws) == [
        {"type": "step/end", "seq": 4, "time": 9, "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "seq": 5, "time": 9, "data": {"turn": 1, "reason": {"kind": "interrupted"}}},
    ]


def test_a_tool_call_block_never_started_gets_a_not_started_result(log_builder):
    L = log_builder
    raws = [turn_start(L, 0), step(L, "step/start", 1), calling(L, 2, "call-a", time=5)]
    closers = closers_for(raws)
    assert [c["seq"] for c in closers] == [3, 4, 5]
    assert [c["type"] for c in closers] == ["tool/result", "step/end", "turn/end"]
    assert closers[0] == {
        "type": "tool/result",
        "seq": 3,
        "time": 5,
        "data": {
            "turn": 1,
            "step": 1,
            "callId": "call-a",
            "content": [{"type": "text", "text": NOT_STARTED}],
            "isError": True,
            "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
        },
        "surfaceOp": "append",
    }


def test_a_started_tool_call_gets_an_outcome_unknown_result_sourced_to_the_call(log_builder):
    L = log_builder
    raws = [turn_start(L, 0), step(L, "step/start", 1), calling(L, 2, "call-a"), tool_call(L, 3, "call-a")]
    closers = closers_for(raws)
    assert [c["seq"] for c in closers] == [4, 5, 6]
    result = closers[0]
    assert result["sourceEventSeqs"] == [3]
    assert result["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert result["data"]["content"] == [{"type": "text", "text": OUTCOME_UNKNOWN}]
    assert "Do not retry blindly." in result["data"]["content"][0]["text"]


def test_pending_calls_are_closed_in_block_order_and_answered_ones_are_skipped(log_builder):
    L = log_builder
    raws = [
        turn_start(L, 0),
        step(L, "step/start", 1),
        calling(L, 2, "c1", "c2", "c3"),
        tool_call(L, 3, "c1"),
        L.raw("tool/result", 4, L.tool_result_data("c1", "done"), op="append", sources=[3]),
        tool_call(L, 5, "c3"),
    ]
    closers = closers_for(raws)
    assert [(c["data"].get("callId"), c["data"].get("error", {}).get("code")) for c in closers[:2]] == [
        ("c2", "TOOL_NOT_STARTED"),
        ("c3", "TOOL_OUTCOME_UNKNOWN"),
    ]
    assert "sourceEventSeqs" not in closers[0]
    assert closers[1]["sourceEventSeqs"] == [5]
    assert [c["type"] for c in closers[2:]] == ["step/end", "turn/end"]


def test_calls_from_earlier_turns_or_closed_steps_are_ignored(log_builder):
    L = log_builder
    earlier_turn = [
        turn_start(L, 0),
        step(L, "step/start", 1),
        calling(L, 2, "old"),
        turn_end(L, 3, kind="aborted"),
    ]
    raws = [*earlier_turn, turn_start(L, 4, turn=2)]
    assert [c["type"] for c in closers_for(raws)] == ["turn/end"]

    closed_step = [
        turn_start(L, 0),
        step(L, "step/start", 1),
        calling(L, 2, "old"),
        step(L, "step/end", 3),
        step(L, "step/start", 4, step=2),
    ]
    assert [c["type"] for c in closers_for(closed_step)] == ["step/end", "turn/end"]
    assert closers_for(closed_step)[0]["data"] == {"turn": 1, "step": 2}


def test_a_stray_tool_call_gets_no_result(log_builder):
    L = log_builder
    raws = [turn_start(L, 0), step(L, "step/start", 1), tool_call(L, 2, "nobody-asked")]
    assert [c["type"] for c in closers_for(raws)] == ["step/end", "turn/end"]


def test_closers_continue_the_log_as_a_valid_surface(log_builder):
    L = log_builder
    raws = [
        turn_start(L, 0),
        L.user(1),
        step(L, "step/start", 2),
        calling(L, 3, "a", "b"),
        tool_call(L, 4, "a"),
    ]
    session = Session(SessionHeader(id="s", created_at=0), [event_from_json(r) for r in raws])
    for closer in closers_for(raws):
        session.append_raw(closer)
    assert session.surface.nodes == [1, 3, 5, 6]
    assert session.open_turn() is None
    assert closers_for([json.loads(e.to_line()) for e in session.events]) == []


# -- resume through the host --------------------------------------------------------------------


def _store_log(host, session_id, raws):
    host.store.append(SessionHeader(id=session_id, created_at=1, cwd="/w"), [event_from_json(r) for r in raws])


async def test_resume_closes_an_open_turn_durably_and_never_rewrites_committed_events(host, log_builder, make_host):
    L = log_builder
    raws = [
        turn_start(L, 0),
        L.user(1, "go"),
        step(L, "step/start", 2),
        calling(L, 3, "a"),
        tool_call(L, 4, "a"),
    ]
    _store_log(host, "crashed", raws)
    _, committed = host.store.read_lines("crashed")

    session = await host.sessions.resume("crashed")
    assert [e.type for e in session.events][5:] == ["tool/result", "step/end", "turn/end"]
    assert session.events[-1].data["reason"] == {"kind": "interrupted"}
    assert session.pending == []

    _, lines = host.store.read_lines("crashed")
    assert lines[:5] == committed
    assert [json.loads(line)["seq"] for line in lines] == list(range(8))

    # A later host resumes the now balanced log without adding anything.
    await host.sessions.close()
    with make_host() as again:
        resumed = await again.sessions.resume("crashed")
        assert resumed.seq == 8
        assert again.store.read_lines("crashed")[1] == lines


async def test_resume_of_a_balanced_log_appends_nothing(host, log_builder):
    L = log_builder
    _store_log(host, "fine", [turn_start(L, 0), L.user(1), turn_end(L, 2)])
    session = await host.sessions.resume("fine")
    assert session.seq == 3
    assert len(host.store.read_lines("fine")[1]) == 3
    assert await host.sessions.resume("fine") is session


async def test_resume_of_an_unknown_session_is_not_found(host):
    with pytest.raises(Exception, match='session "nope" not found'):
        await host.sessions.resume("nope")


@pytest.mark.foreign_logs  # a hand-built log in another writer's old shape, not one dsh wrote
async def test_a_log_from_before_provider_routing_is_refused_on_resume_and_left_unchanged(make_host, log_builder):
    L = log_builder
    assistant = L.raw("assistant/message", 1, {"turn": 1, "step": 1, "content": [L.text("old")]}, op="append")
    events = L.events([L.user(0, "hi"), assistant])
    host = make_host()
    host.store.import_log(L.header("old-shape"), events)
    with pytest.raises(DshError, match=r"^session old-shape cannot be resumed: assistant/message provenance") as raised:
        await host.open_agent("old-shape")
    assert raised.value.code == "NOT_RESUMABLE"
    assert [e.to_line() for e in host.store.read_events("old-shape")[1]] == [e.to_line() for e in events]
    assert host.sessions.get("old-shape") is None
