"""Cancellation and disposal: what is dropped, how turns end, and that the log stays balanced."""

from __future__ import annotations

import asyncio

import pytest

from dsh_host import Allow, hookimpl
from dsh_host.models.scripted import HANG, text_response, tool_call_response
from dsh_host.testing import appended
from tests.dsh_host.agent_harness import ProbeTool, agent_harness, plugin, request_texts, text

NOTE = {"content": [text("note")], "source": plugin("notes")}
PREFIX = {"content": [text("prefix")], "source": plugin("notes"), "placement": "prompt-prefix"}


def assert_balanced(types: list[str]) -> None:
    assert types.count("turn/start") == types.count("turn/end")
    assert types.count("step/start") == types.count("step/end")


def is_partial(event) -> bool:
    return event.type == "assistant/chunk" and event.data["chunk"].get("text") == "partial"


class WaitForSignal:
    """A prompt-submit listener that settles only when the turn is cancelled."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    @hookimpl
    def dsh_prompt_submit(self, signal):
        async def wait():
            self.entered.set()
            await signal.wait()
            return Allow()

        return wait()


async def test_cancel_during_prompt_submit_writes_nothing_of_the_prompt(tmp_path):
    listener = WaitForSignal()
    async with agent_harness(tmp_path, [text_response("never")], extra=[listener]) as h:
        h.agent.send("hello", contexts=[NOTE, PREFIX])
        await listener.entered.wait()
        h.agent.cancel()
        await h.agent.wait_idle()

        assert h.types() == ["turn/start", "turn/end"]
        assert h.turn_ends() == [{"kind": "aborted"}]
        assert h.requests == []
        assert h.statuses == ["running", "idle"]


async def test_cancel_mid_stream_drops_the_queued_tail(tmp_path):
    async with agent_harness(tmp_path, [HANG, text_response("tail")]) as h:
        h.agent.send("one")
        h.agent.send("two")
        await appended(h.session, is_partial)
        h.agent.cancel()
        await h.agent.wait_idle()

        assert h.types(chunks=True) == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/chunk",
            "assistant/chunk",
            "step/end",
            "turn/end",
        ]
        assert h.turn_ends() == [{"kind": "aborted"}]
        assert len(h.requests) == 1
        assert h.statuses == ["running", "idle"]

        await h.run("after")  # the next prompt runs normally
        assert h.turn_ends()[-1] == {"kind": "completed"}


async def test_the_first_cancel_cause_wins_and_is_copied(tmp_path):
    cause = {"kind": "parent"}
    async with agent_harness(tmp_path, [HANG]) as h:
        h.agent.send("one")
        await appended(h.session, is_partial)
        h.agent.cancel(cause)
        h.agent.cancel({"kind": "user"})
        cause["kind"] = "mutated"
        await h.agent.wait_idle()

        signal = h.requests[0].signal
        assert signal.reason == {"kind": "parent"}
        with pytest.raises(TypeError):
            signal.reason["kind"] = "user"
        assert h.turn_ends() == [{"kind": "aborted"}]


async def test_idle_cancel_with_an_empty_inbox_is_a_no_op(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        h.agent.cancel()
        await h.run("hi")

        assert h.turn_ends() == [{"kind": "completed"}]
        assert h.statuses == ["running", "idle"]


async def test_cancel_before_the_driver_wakes_runs_nothing(tmp_path):
    async with agent_harness(tmp_path, [text_response("a")]) as h:
        h.agent.send("one")
        h.agent.send("two")
        h.agent.cancel()
        await h.agent.wait_idle()

        assert h.session.events == ()
        assert h.statuses == []
        await h.run("three")
        assert [e.data["content"] for e in h.of("user/message")] == [[text("three")]]


async def test_steering_pending_at_cancel_is_dropped_with_its_contexts(tmp_path):
    async with agent_harness(tmp_path, [HANG, text_response("next")]) as h:
        h.agent.send("one")
        await appended(h.session, is_partial)
        h.agent.steer("steer text", contexts=[NOTE])
        h.agent.cancel()
        await h.agent.wait_idle()
        await h.run("two")

        assert h.of("steering/message") == []
        assert h.of("context/message") == []
        assert "steer text" not in request_texts(h.requests[1])
        assert h.turn_ends() == [{"kind": "aborted"}, {"kind": "completed"}]


async def test_dispose_with_queued_and_steering_records(tmp_path):
    async with agent_harness(tmp_path, [HANG, text_response("never")]) as h:
        h.agent.send("one")
        await appended(h.session, is_partial)
        h.agent.steer("steer", contexts=[NOTE, PREFIX])
        h.agent.send("queued", contexts=[NOTE])
        await h.agent.dispose()

        types = h.types()
        assert_balanced(types)
        assert types == ["turn/start", "user/message", "step/start", "request/header", "step/end", "turn/end"]
        assert h.turn_ends() == [{"kind": "disposed"}]
        assert len(h.requests) == 1
        assert h.statuses == ["running", "disposed"]
        assert h.agent.status == "disposed"


async def test_disposal_after_a_cancel_still_records_disposed(tmp_path):
    async with agent_harness(tmp_path, [HANG]) as h:
        h.agent.send("one")
        await appended(h.session, is_partial)
        h.agent.cancel()
        await h.agent.dispose()

        assert h.turn_ends() == [{"kind": "disposed"}]


async def test_wait_idle_after_dispose_waits_for_the_driver(tmp_path):
    async with agent_harness(tmp_path, [HANG]) as h:
        h.agent.send("one")
        await appended(h.session, is_partial)
        waiter = asyncio.ensure_future(h.agent.wait_idle())
        disposing = asyncio.ensure_future(h.agent.dispose())
        await waiter
        assert h.of("turn/end") != []  # the driver had finished the turn
        await disposing


async def test_cancel_from_an_assistant_message_observer_skips_the_tool(tmp_path):
    probe = ProbeTool()
    script = [tool_call_response("call-1", "probe", {"x": 1}), text_response("after")]
    async with agent_harness(tmp_path, script, extra=[probe]) as h:
        h.session.subscribe(lambda _, e: e.type == "assistant/message" and h.agent.cancel())
        await h.run("go")

        assert probe.calls == []
        [call] = h.of("tool/call")
        [result] = h.of("tool/result")
        assert result.seq == call.seq + 1
        assert result.source_event_seqs == [call.seq]
        assert result.data == {
            "turn": 1,
            "step": 1,
            "callId": "call-1",
            "content": [text("Error: tool call aborted before dispatch")],
            "isError": True,
            "error": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
        }
        assert h.turn_ends() == [{"kind": "aborted"}]
        assert_balanced(h.types())

        await h.run("again")
        replayed = h.requests[1].messages[2]
        assert replayed == {
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "call-1",
                    "content": [text("Error: tool call aborted before dispatch")],
                    "isError": True,
                }
            ],
        }


def tool_calls_response(*calls: tuple[str, str]) -> list[dict]:
    """One response with several tool calls (ids and names), no text."""
    chunks: list[dict] = []
    for index, (call_id, name) in enumerate(calls):
        block = {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}
        chunks += [
            {"type": "block-start", "index": index, "blockType": "tool-call"},
            {"type": "block-end", "index": index, "block": block},
        ]
    return [*chunks, {"type": "finish", "reason": {"kind": "tool-calls"}}]


async def test_cancel_during_a_tool_lets_it_finish_and_skips_the_undispatched(tmp_path):
    entered = asyncio.Event()

    async def cooperative(arguments):
        entered.set()
        await h.requests[0].signal.wait()

    probe = ProbeTool(cooperative)
    script = [tool_calls_response(("call-1", "probe"), ("call-2", "probe"))]
    async with agent_harness(tmp_path, script, extra=[probe], max_parallel_tools=1) as h:
        h.agent.send("go")
        await entered.wait()
        h.agent.cancel()
        await h.agent.wait_idle()

        assert len(probe.calls) == 1
        tail = [(e.type, e.data.get("callId")) for e in h.session.events if e.type.startswith("tool/")]
        assert tail == [
            ("tool/call", "call-1"),
            ("tool/result", "call-1"),
            ("tool/call", "call-2"),
            ("tool/result", "call-2"),
        ]
        first, second = h.of("tool/result")
        assert first.data["isError"] is False
        assert second.data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
        assert h.turn_ends() == [{"kind": "aborted"}]
        assert_balanced(h.types())


async def test_cancel_from_a_running_listener_claims_the_replacement(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:

        def on_status(status):
            if status == "running" and not h.session.events:
                h.agent.cancel()
                h.agent.send("replacement")

        h.agent.on_status(on_status)
        h.agent.send("original")
        await h.agent.wait_idle()

        assert [e.data["content"] for e in h.of("user/message")] == [[text("replacement")]]
        assert h.turn_ends() == [{"kind": "completed"}]
        assert h.statuses == ["running", "idle"]


async def test_cancel_from_a_running_listener_without_replacement(tmp_path):
    async with agent_harness(tmp_path) as h:
        h.agent.on_status(lambda status: status == "running" and h.agent.cancel())
        h.agent.send("original")
        await h.agent.wait_idle()

        assert h.session.events == ()
        assert h.statuses == ["running", "idle"]


async def test_cancel_from_a_turn_end_observer_does_not_touch_the_turn(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        h.session.subscribe(lambda _, e: e.type == "turn/end" and h.agent.cancel())
        await h.run("hi")

        assert h.turn_ends() == [{"kind": "completed"}]
        assert not h.requests[0].signal.is_set()
