"""The step loop: requests from the log, tools, request recovery, headers and durability."""

from __future__ import annotations

import asyncio
import enum
from typing import Any

import pytest

from dsh_host import Agent, hookimpl
from dsh_host.agent.errors import render_error
from dsh_host.log import rebuild_request, request_json
from dsh_host.models.assembler import StreamAssembler
from dsh_host.models.base import ModelFailure
from dsh_host.models.scripted import (
    error_finish_response,
    max_tokens_response,
    text_response,
    tool_call_response,
)
from dsh_host.session.events import PROMPT_DELIMITER
from dsh_host.session.frozen import FrozenDict
from dsh_host.tools.base import ToolResult
from tests.dsh_host.agent_harness import (
    ProbeTool,
    agent_harness,
    fixed_session,
    request_texts,
    start_host,
    text,
)


def fail_with(error: BaseException):
    def entry(request):
        raise error

    return entry


class RetryTwice:
    """Retries the first two failures of a run of failed requests."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, str, list]] = []

    @hookimpl
    def dsh_agent_request_error(self, turn, step, error, failure, prior_failures):
        self.seen.append((turn, step, failure["code"], [f["code"] for f in prior_failures]))
        return "retry" if len(prior_failures) < 2 else None


async def test_request_error_retry_opens_a_new_step(tmp_path):
    retry = RetryTwice()
    script = [fail_with(ModelFailure("overloaded", "SERVER_ERROR", status=503)), text_response("recovered")]
    async with agent_harness(tmp_path, script, extra=[retry]) as h:
        await h.run("go")

        assert retry.seen == [(1, 1, "SERVER_ERROR", [])]
        assert [(e.type, e.data["step"]) for e in h.session.events if e.type.startswith("step/")] == [
            ("step/start", 1),
            ("step/end", 1),
            ("step/start", 2),
            ("step/end", 2),
        ]
        assert h.turn_ends() == [{"kind": "completed"}]
        assert len(h.of("request/header")) == 1  # an identical header is not logged again
        assert h.requests[1].messages == h.requests[0].messages


async def test_request_errors_fail_the_turn_once_recovery_gives_up(tmp_path):
    retry = RetryTwice()
    script = [
        fail_with(ModelFailure("first", "RATE_LIMIT", status=429)),
        fail_with(ModelFailure("second", "RATE_LIMIT", status=429)),
        error_finish_response("third", "SERVER_ERROR"),
    ]
    async with agent_harness(tmp_path, script, extra=[retry]) as h:
        await h.run("go")

        assert [prior for *_, prior in retry.seen] == [[], ["RATE_LIMIT"], ["RATE_LIMIT", "RATE_LIMIT"]]
        assert h.turn_ends() == [{"kind": "error", "step": 3, "failure": {"message": "third", "code": "SERVER_ERROR"}}]
        assert len(h.of("step/start")) == len(h.of("step/end")) == 3


async def test_a_failed_request_fails_the_turn_with_the_rendered_chain(tmp_path):
    try:
        try:
            raise ConnectionResetError("ECONNRESET")
        except ConnectionResetError as cause:
            raise ModelFailure("fetch failed", "NETWORK", request_id="r-1") from cause
    except ModelFailure as error:
        failure = error
    async with agent_harness(tmp_path, [fail_with(failure), text_response("next")]) as h:
        h.agent.send("one")
        h.agent.send("two")
        await h.agent.wait_idle()

        assert h.turn_ends() == [
            {
                "kind": "error",
                "step": 1,
                "failure": {"message": "fetch failed: ECONNRESET", "code": "NETWORK", "requestId": "r-1"},
            },
            {"kind": "completed"},
        ]


class BrokenRecovery:
    @hookimpl
    def dsh_agent_request_error(self):
        raise RuntimeError("recovery broke")


async def test_a_broken_recovery_plugin_means_fail(tmp_path, caplog):
    async with agent_harness(
        tmp_path, [fail_with(ModelFailure("down", "SERVER_ERROR"))], extra=[BrokenRecovery()]
    ) as h:
        await h.run("go")

        assert h.turn_ends() == [{"kind": "error", "step": 1, "failure": {"message": "down", "code": "SERVER_ERROR"}}]
    assert "request recovery failed at turn 1, step 1: recovery broke" in caplog.text


class ThrowOnFirst:
    @hookimpl
    def dsh_prompt_submit(self, content):
        if content == [text("first")]:
            raise ValueError("prompt hook broke")


async def test_a_throwing_prompt_listener_fails_only_its_turn(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], extra=[ThrowOnFirst()]) as h:
        h.agent.send("first", contexts=[{"content": [text("ctx")], "source": {"kind": "user"}}])
        h.agent.send("second")
        await h.agent.wait_idle()

        assert h.turn_ends() == [
            {"kind": "error", "step": 0, "message": "prompt hook broke"},
            {"kind": "completed"},
        ]
        assert h.statuses == ["running", "idle"]
        assert len(h.requests) == 1
        assert h.of("context/message") == []


class CodedError(Exception):
    code = "E_CODED"


async def test_a_tool_round_trip_and_error_results(tmp_path):
    def during(arguments):
        if arguments.get("boom"):
            raise CodedError("tool blew up")
        return ToolResult.text(f"echo {arguments['say']}")

    probe = ProbeTool(during)
    script = [
        tool_call_response("call-1", "probe", {"say": "hi"}, text="let me check"),
        tool_call_response("call-2", "probe", {"boom": True}),
        tool_call_response("call-3", "missing", {}),
        [
            {"type": "block-start", "index": 0, "blockType": "tool-call"},
            {
                "type": "tool-call-delta",
                "index": 0,
                "id": "call-4",
                "name": "probe",
                "argumentsDelta": "{oops",
            },
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ],
        text_response("done"),
    ]
    async with agent_harness(tmp_path, script, extra=[probe]) as h:
        await h.run("go")

        results = {e.data["callId"]: e.data for e in h.of("tool/result")}
        assert results["call-1"]["content"] == [text("echo hi")]
        assert results["call-1"]["isError"] is False
        assert "error" not in results["call-1"]
        assert results["call-2"]["content"] == [text("Error: tool blew up")]
        assert results["call-2"]["error"] == {"name": "CodedError", "code": "E_CODED"}
        assert results["call-3"]["content"] == [text('Error: unknown tool "missing"')]
        assert results["call-3"]["error"] == {"name": "ToolNotFoundError", "code": "TOOL_NOT_FOUND"}
        assert results["call-4"]["error"] == {"name": "ToolArgumentsError", "code": "INVALID_ARGUMENTS"}
        assert probe.calls == [{"say": "hi"}, {"boom": True}]
        for call, result in zip(h.of("tool/call"), h.of("tool/result"), strict=True):
            assert result.source_event_seqs == [call.seq]
            assert call.data["callId"] == result.data["callId"]
        assert [e.data["step"] for e in h.of("step/start")] == [1, 2, 3, 4, 5]
        assert h.turn_ends() == [{"kind": "completed"}]
        # Every request extends the previous one.
        for earlier, later in zip(h.requests, h.requests[1:], strict=False):
            assert later.messages[: len(earlier.messages)] == earlier.messages


async def test_tool_calls_run_concurrently_and_commit_in_model_order(tmp_path):
    running = 0
    peak = 0
    release = asyncio.Event()
    order: list[str] = []

    async def during(arguments):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            release.set()
        await release.wait()
        running -= 1
        order.append(arguments["n"])
        return ToolResult.text(arguments["n"])

    chunks = []
    for index, n in enumerate(["a", "b", "c"]):
        block = {"type": "tool-call", "id": f"call-{n}", "name": "probe", "arguments": f'{{"n":"{n}"}}'}
        chunks += [
            {"type": "block-start", "index": index, "blockType": "tool-call"},
            {"type": "block-end", "index": index, "block": block},
        ]
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    probe = ProbeTool(during)
    async with agent_harness(tmp_path, [chunks, text_response("done")], extra=[probe], max_parallel_tools=2) as h:
        await h.run("go")

        assert peak == 2
        assert [e.data["callId"] for e in h.of("tool/result")] == ["call-a", "call-b", "call-c"]
        assert [e.data["content"] for e in h.of("tool/result")] == [[text("a")], [text("b")], [text("c")]]


async def test_max_tokens_strips_tool_calls_and_their_replay_state(tmp_path):
    cut = [
        *tool_call_response("call-1", "probe", {}, text="partial")[:-2],
        {"type": "finish", "reason": {"kind": "max-tokens"}, "replayState": {"opaque": 1}},
    ]
    probe = ProbeTool()
    async with agent_harness(tmp_path, [cut], extra=[probe]) as h:
        await h.run("go")

        [message] = h.of("assistant/message")
        assert message.data["content"] == [text("partial")]
        assert message.data["provenance"] == {"provider": "mock", "model": "mock"}
        assert probe.calls == []
        assert h.turn_ends() == [{"kind": "max-tokens"}]


async def test_replay_state_is_kept_when_the_content_is_untouched(tmp_path):
    reply = [
        *max_tokens_response("cut")[:-1],
        {"type": "finish", "reason": {"kind": "stop"}, "replayState": "rs"},
    ]
    async with agent_harness(tmp_path, [reply]) as h:
        await h.run("go")

        [message] = h.of("assistant/message")
        assert message.data["provenance"] == {"provider": "mock", "model": "mock", "replayState": "rs"}
        assert message.data["usage"] == {"inputTokens": 10, "outputTokens": 3}


class PostStep:
    def __init__(self, fail_at: int | None = None) -> None:
        self.seen: list[tuple[int, int, int]] = []
        self.fail_at = fail_at

    @hookimpl
    def dsh_agent_post_step(self, agent, turn, step):
        async def run():
            self.seen.append((turn, step, len(agent.session.pending)))
            if step == self.fail_at:
                raise RuntimeError("post-step broke")

        return run()


async def test_post_step_runs_after_the_step_is_durable(tmp_path):
    post = PostStep()
    script = [tool_call_response("call-1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[post, ProbeTool()]) as h:
        await h.run("go")

        assert post.seen == [(1, 1, 0), (1, 2, 0)]  # nothing was left unflushed
        _, stored = h.host.store.read_events("s1")
        assert [e.to_line() for e in stored] == h.lines()


async def test_a_failing_post_step_fails_the_turn_with_balanced_steps(tmp_path):
    async with agent_harness(tmp_path, [text_response("done")], extra=[PostStep(fail_at=1)]) as h:
        await h.run("go")

        assert h.turn_ends() == [{"kind": "error", "step": 1, "message": "post-step broke"}]
        assert h.types()[-2:] == ["step/end", "turn/end"]


async def test_tool_call_is_durable_before_the_tool_body_runs(tmp_path):
    def during(arguments):
        _, stored = h.host.store.read_events("s1")
        stored_types.extend(e.type for e in stored)

    stored_types: list[str] = []
    script = [tool_call_response("call-1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[ProbeTool(during)]) as h:
        await h.run("go")

        assert stored_types[-2:] == ["assistant/message", "tool/call"]


async def test_request_header_logging_initial_change_and_resume(tmp_path):
    session = fixed_session(tmp_path)
    script = [text_response("a"), text_response("b"), text_response("c")]
    async with agent_harness(tmp_path, script, session=session) as h:
        await h.run("one")
        h.agent.system = "a different system prompt"
        await h.run("two")
        host = h.host
        async with agent_harness(tmp_path, [text_response("c")], host=host, session=session) as second:
            await second.run("three")

        headers = [(e.data["reason"], e.data["header"].get("system")) for e in h.of("request/header")]
        assert headers == [
            ("initial", "You are an AI agent powered by the DeepSeek Harness SDK."),
            ("change", "a different system prompt"),
            ("resume", "You are an AI agent powered by the DeepSeek Harness SDK."),
        ]


async def test_requests_are_frozen_and_rebuilt_from_the_log(tmp_path):
    async with agent_harness(tmp_path, [text_response("a"), text_response("b")]) as h:
        await h.run("one")
        await h.run("two")

        request = h.requests[1]
        with pytest.raises(TypeError):
            request.messages.append({"role": "user", "content": []})
        with pytest.raises(TypeError):
            request.messages[0]["content"] = []
        [_, step_start] = h.of("step/start")
        rebuilt = rebuild_request(h.session.events, step_start.seq)
        assert rebuilt == {
            "provider": "mock",
            "model": "mock",
            "messages": [
                {"role": "user", "content": [text("one")]},
                {
                    "role": "assistant",
                    "content": [text("a")],
                    "provenance": {"provider": "mock", "model": "mock"},
                },
                {"role": "user", "content": [text("two")]},
            ],
            "system": "You are an AI agent powered by the DeepSeek Harness SDK.",
        }
        assert request.session_id == "s1"
        with pytest.raises(ValueError, match="not a step/start"):
            rebuild_request(h.session.events, 0)


async def test_a_registry_session_is_persisted_and_titled(tmp_path):
    host = start_host(tmp_path, "fs-read")
    try:
        session = host.sessions.create(str(tmp_path))
        async with agent_harness(tmp_path, [text_response("hello there")], host=host, session=session) as h:
            await h.run("what is in here?")

            assert sorted(h.agent.tools) == ["list_dir", "read_file"]
            assert h.of("session/title")[0].data["title"] == "what is in here?"
            _, stored = host.store.read_events(session.id)
            assert [e.to_line() for e in stored] == h.lines()
            assert h.session.pending == []
    finally:
        host.close()


def test_agent_options_are_validated(tmp_path):
    host = start_host(tmp_path)
    try:
        session = fixed_session(tmp_path)
        with pytest.raises(ValueError, match="has no provider/model"):
            Agent(host, session, provider="", model="m", adapter=None)
        with pytest.raises(ValueError, match="max_parallel_tools"):
            Agent(host, session, provider="p", model="m", adapter=None, max_parallel_tools=0)
    finally:
        host.close()


async def test_create_from_a_resolved_model(tmp_path):
    host = start_host(tmp_path)
    try:
        resolved = host.models.resolve("scripted")
        agent = Agent.create(host, fixed_session(tmp_path), resolved)
        assert (agent.provider, agent.model) == ("scripted", "scripted")
        agent.send("hello")
        await agent.wait_idle()
        await agent.dispose()

        events = agent.session.events
        [message] = [e for e in events if e.type == "assistant/message"]
        assert message.data["content"] == [text("Scripted reply: hello")]
        [step_start] = [e for e in events if e.type == "step/start"]
        assert request_json(resolved.adapter.requests[0]) == rebuild_request(events, step_start.seq)
    finally:
        host.close()


async def test_prompt_prefix_delimiter_is_a_block_of_its_own(tmp_path):
    prefix = {"content": [text("ctx")], "source": {"kind": "user"}, "placement": "prompt-prefix"}
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        await h.run([], contexts=[prefix])

        [message] = h.of("user/message")
        assert message.data["content"] == [text("ctx"), text(PROMPT_DELIMITER)]
        assert message.data["envelope"]["displayContent"] == []
        assert request_texts(h.requests[0]) == ["ctx", PROMPT_DELIMITER]


class _Text(str):
    """A str subclass: equal to its JSON, but not the type the log gives back."""


class _Index(enum.IntEnum):
    FIRST = 0


def _logged_assembly(session) -> Any:
    """What assembling the logged chunks gives: the answer, or the error it raises."""
    assembler = StreamAssembler()
    for event in session.events:
        if event.type == "assistant/chunk":
            assembler.feed(event.data["chunk"])
    try:
        return assembler.finish().content
    except Exception as exc:  # noqa: BLE001 - the error itself is what the test compares
        return render_error(exc)


async def test_chunks_that_only_equal_their_json_assemble_as_logged(tmp_path):
    chunks = [
        {"type": "block-start", "index": _Index.FIRST, "blockType": _Text("text")},
        {"type": "text-delta", "index": _Index.FIRST, "text": _Text("he")},
        FrozenDict(type="text-delta", index=0, text="l"),
        {"type": _Text("reasoning-delta"), "index": 1, "text": _Text("why")},
        {"type": "text-delta", "index": 0, "text": "lo"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    async with agent_harness(tmp_path, [chunks]) as h:
        await h.run("go")

        [answer] = h.of("assistant/message")
        assert answer.data["content"] == _logged_assembly(h.session)
        assert answer.data["content"] == [text("hello"), {"type": "reasoning", "text": "why"}]
        assert all(type(block["text"]) is str for block in answer.data["content"])


@pytest.mark.parametrize(
    "delta",
    [
        {"type": "text-delta", "index": 0, "text": {"not": "text"}},
        {"type": "text-delta", "index": 0, "text": ["not", "text"]},
        {"type": "text-delta", "index": [0], "text": "x"},
        {"type": "reasoning-delta", "index": {"at": 0}, "text": "x"},
    ],
)
async def test_a_malformed_delta_fails_or_assembles_as_its_logged_form_does(tmp_path, delta):
    chunks = [delta, {"type": "text-delta", "index": 0, "text": "y"}, {"type": "finish", "reason": {"kind": "stop"}}]
    async with agent_harness(tmp_path, [chunks]) as h:
        await h.run("go")

        expected = _logged_assembly(h.session)
        [end] = h.turn_ends()
        if isinstance(expected, str):
            assert end == {"kind": "error", "step": 1, "message": expected}
        else:
            assert end == {"kind": "completed"}
            assert h.of("assistant/message")[0].data["content"] == expected
