"""Placement of prompts and their contexts, byte for byte as the reference implementation logs them:
a prefix context baked into the prompt, separate contexts after it, and both for a steer."""

from __future__ import annotations

import json

from dsh_host import Allow, Block, hookimpl
from dsh_host.asyncs import resolve
from dsh_host.models.scripted import text_response, tool_call_response
from dsh_host.session.events import PROMPT_DELIMITER
from tests.dsh_host.agent_harness import (
    SYSTEM,
    USER,
    ProbeTool,
    agent_harness,
    golden,
    plugin,
    request_texts,
    text,
)

DELIM = text(PROMPT_DELIMITER)
SNAPSHOT_CONTEXT = {
    "content": [text("<snapshot>")],
    "source": plugin("session-reference"),
    "placement": "prompt-prefix",
    "meta": {"kind": "session-reference", "version": 1},
}
NOTE_CONTEXT = {"content": [text("<note>")], "source": plugin("notes"), "placement": "separate"}

PREFIX_AND_SEPARATE_CONTEXT_LOG = """
{"type":"turn/start","seq":0,"time":T,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}
{"type":"user/message","seq":1,"time":T,"data":{"content":[{"type":"text","text":"<snapshot>"},{"type":"text","text":"\\n\\n## My request:\\n"},{"type":"text","text":"what did we decide?"}],"source":{"kind":"user"},"envelope":{"displayContent":[{"type":"text","text":"what did we decide?"}],"prefixContexts":[{"source":{"kind":"plugin","plugin":"session-reference"},"meta":{"kind":"session-reference","version":1}}]}},"surfaceOp":"append"}
{"type":"context/message","seq":2,"time":T,"data":{"content":[{"type":"text","text":"<note>"}],"source":{"kind":"plugin","plugin":"notes"}},"surfaceOp":"append"}
{"type":"step/start","seq":3,"time":T,"data":{"turn":1,"step":1}}
{"type":"request/header","seq":4,"time":T,"data":{"header":{"config":{"provider":"mock","model":"mock"},"system":"You are an AI agent powered by the DeepSeek Harness SDK."},"reason":"initial"}}
{"type":"assistant/chunk","seq":5,"time":T,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","seq":6,"time":T,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"o"}}}
{"type":"assistant/chunk","seq":7,"time":T,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"k"}}}
{"type":"assistant/chunk","seq":8,"time":T,"data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"ok"}}}}
{"type":"assistant/chunk","seq":9,"time":T,"data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":2}}}}
{"type":"assistant/chunk","seq":10,"time":T,"data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}
{"type":"assistant/message","seq":11,"time":T,"data":{"turn":1,"step":1,"content":[{"type":"text","text":"ok"}],"provenance":{"provider":"mock","model":"mock"},"usage":{"inputTokens":10,"outputTokens":2}},"sourceEventSeqs":[5,6,7,8,9,10],"surfaceOp":"append"}
{"type":"step/end","seq":12,"time":T,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":13,"time":T,"data":{"turn":1,"reason":{"kind":"completed"}}}
"""  # noqa: E501 - log lines exactly as the reference implementation writes them


class QueuedRecorder:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    @hookimpl
    def dsh_agent_queued(self, agent, content, info):
        self.seen.append((content, info))


async def test_a_prefix_context_is_baked_into_the_prompt_and_a_separate_one_follows_it(tmp_path):
    recorder = QueuedRecorder()
    async with agent_harness(tmp_path, [text_response("ok")], extra=[recorder]) as h:
        await h.run([text("what did we decide?")], contexts=[SNAPSHOT_CONTEXT, NOTE_CONTEXT])

        assert h.lines() == golden(PREFIX_AND_SEPARATE_CONTEXT_LOG)
        assert [dict(m) for m in h.requests[0].messages] == [
            {"role": "user", "content": [text("<snapshot>"), DELIM, text("what did we decide?")]},
            {"role": "user", "content": [text("<note>")]},
        ]
        [(content, info)] = recorder.seen
        assert content == [text("what did we decide?")]
        assert info == {"source": USER, "contexts": [SNAPSHOT_CONTEXT, NOTE_CONTEXT], "steering": False}


async def test_a_prompt_without_contexts_writes_no_envelope_key(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        await h.run([text("what did we decide?")])

        [message] = h.of("user/message")
        # The same bytes a host that knows nothing about contexts writes.
        assert (
            message.data_json == '{"content":[{"type":"text","text":"what did we decide?"}],"source":{"kind":"user"}}'
        )
        assert message.to_line() == (
            '{"type":"user/message","seq":1,"time":1700000000000,"data":{"content":[{"type":"text",'
            '"text":"what did we decide?"}],"source":{"kind":"user"}},"surfaceOp":"append"}'
        )
        assert h.types() == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]


class RewriteAfterNext:
    """A wrapper that rewrites the prompt but keeps the downstream contexts."""

    def __init__(self) -> None:
        self.seen_contexts = None

    @hookimpl(wrapper=True)
    def dsh_prompt_submit(self, agent, content, source, signal, contexts):
        downstream = yield

        async def rewrite():
            decision = await resolve(downstream)
            self.seen_contexts = decision.additional_contexts
            return Allow(content=[text("rewritten")], additional_contexts=decision.additional_contexts)

        return rewrite()


async def test_wrapper_rewrites_content_and_keeps_the_prefix_context(tmp_path):
    wrapper = RewriteAfterNext()
    async with agent_harness(tmp_path, [text_response("ok")], extra=[wrapper]) as h:
        await h.run([text("what did we decide?")], contexts=[SNAPSHOT_CONTEXT])

        [message] = h.of("user/message")
        assert message.data == {
            "content": [text("<snapshot>"), DELIM, text("rewritten")],
            "source": USER,
            "envelope": {
                "displayContent": [text("rewritten")],
                "prefixContexts": [
                    {
                        "source": plugin("session-reference"),
                        "meta": {"kind": "session-reference", "version": 1},
                    }
                ],
            },
        }
        assert h.of("context/message") == []
        assert h.requests[0].messages[-1]["content"] == message.data["content"]
        assert "what did we decide?" not in request_texts(h.requests[0])
        assert wrapper.seen_contexts == [SNAPSHOT_CONTEXT]


class BlockWith:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    @hookimpl
    def dsh_prompt_submit(self, content):
        return Block(self.reason) if content == [text("what did we decide?")] else None


async def test_block_writes_no_prompt_and_no_contexts(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], extra=[BlockWith("R")]) as h:
        await h.run([text("what did we decide?")], contexts=[SNAPSHOT_CONTEXT, NOTE_CONTEXT])

        assert [e.to_json() for e in h.session.events] == [
            {
                "type": "turn/start",
                "seq": 0,
                "time": 1700000000000,
                "data": {"turn": 1, "trigger": {"kind": "message", "source": USER}},
            },
            {
                "type": "prompt/blocked",
                "seq": 1,
                "time": 1700000000000,
                "data": {"content": [text("what did we decide?")], "source": USER, "reason": "R"},
            },
            {
                "type": "turn/end",
                "seq": 2,
                "time": 1700000000000,
                "data": {"turn": 1, "reason": {"kind": "rejected", "reason": "R"}},
            },
        ]
        assert h.requests == []


async def test_blocked_send_next_to_an_allowed_one(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], extra=[BlockWith("no")]) as h:
        h.agent.send([text("what did we decide?")])
        h.agent.send([text("fine")])
        await h.agent.wait_idle()

        assert h.turn_ends() == [{"kind": "rejected", "reason": "no"}, {"kind": "completed"}]
        assert len(h.requests) == 1


class ExtraContext:
    @hookimpl
    def dsh_prompt_submit(self):
        return Allow(
            additional_contexts=[
                {
                    "content": [text("<system-reminder>extra ctx</system-reminder>")],
                    "source": plugin("test"),
                    "meta": {"kind": "prompt-context", "version": 1},
                }
            ]
        )


async def test_a_context_from_a_listener_follows_the_prompt_before_the_step(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], extra=[ExtraContext()]) as h:
        await h.run([text("go")])

        events = h.session.events
        assert [e.type for e in events[:4]] == ["turn/start", "user/message", "context/message", "step/start"]
        assert events[1].to_line() == (
            '{"type":"user/message","seq":1,"time":1700000000000,"data":{"content":[{"type":"text","text":"go"}],'
            '"source":{"kind":"user"}},"surfaceOp":"append"}'
        )
        assert events[2].to_line() == (
            '{"type":"context/message","seq":2,"time":1700000000000,"data":{"content":[{"type":"text",'
            '"text":"<system-reminder>extra ctx</system-reminder>"}],'
            '"source":{"kind":"plugin","plugin":"test"},'
            '"meta":{"kind":"prompt-context","version":1}},"surfaceOp":"append"}'
        )
        assert request_texts(h.requests[0]) == ["go", "<system-reminder>extra ctx</system-reminder>"]


STEER_WITH_CONTEXTS_LOG_TAIL = """
{"type":"steering/message","seq":0,"time":T,"data":{"turn":1,"content":[{"type":"text","text":"P"},{"type":"text","text":"\\n\\n## My request:\\n"},{"type":"text","text":"accepted-steer"}],"source":{"kind":"plugin","plugin":"accepted-source"},"envelope":{"displayContent":[{"type":"text","text":"accepted-steer"}],"prefixContexts":[{"source":{"kind":"plugin","plugin":"steering-prefix"}}]}},"surfaceOp":"append"}
{"type":"context/message","seq":0,"time":T,"data":{"content":[{"type":"text","text":"S1"}],"source":{"kind":"plugin","plugin":"steering-context"},"meta":{"kind":"separate-card"}},"surfaceOp":"append"}
{"type":"context/message","seq":0,"time":T,"data":{"content":[{"type":"text","text":"S2"}],"source":{"kind":"plugin","plugin":"steering-context-without-meta"}},"surfaceOp":"append"}
{"type":"step/end","seq":0,"time":T,"data":{"turn":1,"step":1}}
{"type":"step/start","seq":0,"time":T,"data":{"turn":1,"step":2}}
"""  # noqa: E501 - log lines exactly as the reference implementation writes them


async def test_a_steer_bakes_its_prefix_context_and_appends_separate_ones_between_steps(tmp_path):
    contexts = [
        {"content": [text("P")], "source": plugin("steering-prefix"), "placement": "prompt-prefix"},
        {"content": [text("S1")], "source": plugin("steering-context"), "meta": {"kind": "separate-card"}},
        {"content": [text("S2")], "source": plugin("steering-context-without-meta")},
    ]
    recorder = QueuedRecorder()

    def steer_during_tool(arguments):
        h.agent.steer([text("accepted-steer")], source=plugin("accepted-source"), contexts=contexts)
        # The caller's objects are its own again: nothing below reaches the log or the request.
        contexts[0]["placement"] = "separate"
        contexts[1]["content"].append(text("mutated"))
        contexts.append({"content": [text("late")], "source": USER})

    probe = ProbeTool(steer_during_tool)
    script = [tool_call_response("call-1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[probe, recorder]) as h:
        await h.run([text("go")])

        events = h.session.events
        [result] = h.of("tool/result")
        tail = events[result.seq + 1 : result.seq + 6]
        assert [json.loads(e.to_line()) | {"seq": 0} for e in tail] == [
            json.loads(x) for x in golden(STEER_WITH_CONTEXTS_LOG_TAIL)
        ]
        steering = tail[0]
        assert tail[1].seq == steering.seq + 1
        assert h.turn_ends() == [{"kind": "completed"}]
        assert len(h.requests) == 2
        assert h.requests[1].messages[-3:] == [
            {"role": "user", "content": [text("P"), DELIM, text("accepted-steer")]},
            {"role": "user", "content": [text("S1")]},
            {"role": "user", "content": [text("S2")]},
        ]
        _, info = recorder.seen[1]
        assert info["steering"] is True
        assert info["source"] == plugin("accepted-source")


async def test_system_prompt_is_omitted_when_empty(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], system=None) as h:
        await h.run("hi")

        [header] = h.of("request/header")
        assert header.data == {
            "header": {"config": {"provider": "mock", "model": "mock"}},
            "reason": "initial",
        }
        assert h.requests[0].system is None
        assert SYSTEM not in header.data_json
