"""`inject`: model-hidden meta, one-shot injection turns, and deferral during a tool batch."""

from __future__ import annotations

import asyncio
import math

import pytest

from dsh_host import hookimpl
from dsh_host.models.scripted import text_response, tool_call_response
from dsh_host.tools.base import ToolResult
from tests.dsh_host.agent_harness import (
    USER,
    ProbeTool,
    agent_harness,
    plugin,
    request_texts,
    start_host,
    text,
)

CONTEXT_ERROR = "agent context must be losslessly JSON-serializable"
TOOL_CONTEXT = {"content": [text("tool context")], "source": plugin("tool"), "placement": "x"}


async def test_idle_inject_is_a_one_shot_turn_without_a_model_call(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        h.agent.inject("workspace notice", source=plugin("workspace"))

        assert [e.to_json() for e in h.session.events] == [
            {
                "type": "turn/start",
                "seq": 0,
                "time": 1700000000000,
                "data": {"turn": 1, "trigger": {"kind": "injection", "source": plugin("workspace")}},
            },
            {
                "type": "context/message",
                "seq": 1,
                "time": 1700000000000,
                "data": {"content": [text("workspace notice")], "source": plugin("workspace")},
                "surfaceOp": "append",
            },
            {
                "type": "turn/end",
                "seq": 2,
                "time": 1700000000000,
                "data": {"turn": 1, "reason": {"kind": "completed"}},
            },
        ]
        assert h.statuses == []
        await h.run("hello")
        # No framing: the content reaches the model exactly as injected.
        assert h.requests[0].messages[0] == {"role": "user", "content": [text("workspace notice")]}


async def test_inject_meta_is_durable_and_hidden_from_the_model(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        h.agent.inject([text("with meta")], meta={"kind": "card", "n": 1})
        h.agent.inject([text("null meta")], meta=None)
        h.agent.inject([text("no meta")])
        await h.run("go")

        datas = [e.data for e in h.of("context/message")]
        assert datas == [
            {"content": [text("with meta")], "source": USER, "meta": {"kind": "card", "n": 1}},
            {"content": [text("null meta")], "source": USER, "meta": None},
            {"content": [text("no meta")], "source": USER},
        ]
        assert '"meta":null' in h.of("context/message")[1].data_json
        assert request_texts(h.requests[0]) == ["with meta", "null meta", "no meta", "go"]
        assert "card" not in str(h.requests[0].messages)


async def test_inject_during_a_tool_batch_waits_for_the_results(tmp_path):
    meta = {"kind": "notice"}

    def during(arguments):
        h.agent.inject("notice during tool", meta=meta)
        meta["kind"] = "mutated"
        # Inside the batch nothing is appended yet: the injection waits for every result.
        assert h.of("context/message") == []
        return ToolResult(
            content=[text("tool output")],
            additional_contexts=[{"content": [text("tool context")], "source": plugin("tool"), "placement": "x"}],
        )

    probe = ProbeTool(during)
    script = [tool_call_response("call-1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[probe]) as h:
        await h.run("go")

        [result] = h.of("tool/result")
        notice, tool_context = h.of("context/message")
        assert (notice.seq, tool_context.seq) == (result.seq + 1, result.seq + 2)
        assert notice.data == {
            "content": [text("notice during tool")],
            "source": USER,
            "meta": {"kind": "notice"},
        }
        # The tool path keeps the context's own keys, placement included.
        assert tool_context.data == {
            "content": [text("tool context")],
            "source": plugin("tool"),
            "placement": "x",
        }
        assert len(h.of("turn/start")) == 1
        assert request_texts(h.requests[1])[-2:] == ["notice during tool", "tool context"]


async def test_invalid_inject_during_a_batch_raises_and_writes_nothing(tmp_path):
    raised: list[str] = []

    def during(arguments):
        with pytest.raises(TypeError) as info:
            h.agent.inject("bad", meta={"n": math.inf})
        raised.append(str(info.value))

    probe = ProbeTool(during)
    script = [tool_call_response("call-1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[probe]) as h:
        await h.run("go")

        assert raised == [CONTEXT_ERROR]
        assert h.of("context/message") == []
        assert h.turn_ends() == [{"kind": "completed"}]


async def test_inject_decides_enclosure_from_the_log(tmp_path):
    async with agent_harness(tmp_path) as h:
        h.session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}})
        h.agent.inject("inside")
        assert h.types() == ["turn/start", "context/message"]

        h.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        h.agent.inject("outside")
        assert h.types()[2:] == ["turn/end", "turn/start", "context/message", "turn/end"]
        assert h.of("turn/start")[1].data == {"turn": 2, "trigger": {"kind": "injection", "source": USER}}


async def test_idle_inject_with_bad_content_still_closes_and_flushes_its_turn(tmp_path):
    async with agent_harness(tmp_path) as h:
        with pytest.raises(TypeError, match='session event "context/message" carries non-JSON-serializable data'):
            h.agent.inject([{"type": "text", "text": math.nan}])
        assert h.types() == ["turn/start", "turn/end"]
        await h.agent.dispose()  # waits for the background flush

        _, stored = h.host.store.read_events("s1")
        assert [e.type for e in stored] == ["turn/start", "turn/end"]


async def test_idle_inject_with_a_bad_source_logs_nothing(tmp_path):
    async with agent_harness(tmp_path) as h:
        with pytest.raises(TypeError, match='session event "turn/start"'):
            h.agent.inject("x", source={"kind": object()})
        assert h.session.events == ()


async def test_idle_inject_flush_failure_is_reported_not_raised(tmp_path, caplog):
    host = start_host(tmp_path)
    try:

        async def failing_flush(session):
            raise OSError("disk full")

        host.sessions.flush = failing_flush
        async with agent_harness(tmp_path, host=host) as h:
            h.agent.inject("note")
            await h.agent.dispose()
    finally:
        host.close()
    assert "flush after idle injection 1 failed: disk full" in caplog.text


class InjectOnSubmit:
    @hookimpl
    def dsh_prompt_submit(self, agent):
        agent.inject("side note")


async def test_inject_from_a_prompt_submit_listener_precedes_the_prompt(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], extra=[InjectOnSubmit()]) as h:
        await h.run("go")
        assert h.types()[:3] == ["turn/start", "context/message", "user/message"]


async def test_inject_without_a_running_loop_leaves_the_flush_to_the_next_checkpoint(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        await asyncio.to_thread(h.agent.inject, "from a thread")
        assert len(h.session.pending) == 3
        await h.run("go")
        assert h.session.pending == []
