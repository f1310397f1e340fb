"""Steering: drained at the two checkpoints of a step, re-queued with its contexts when late."""

from __future__ import annotations

from dsh_host import Block, hookimpl
from dsh_host.models.scripted import text_response, tool_call_response
from dsh_host.session.events import PROMPT_DELIMITER
from tests.dsh_host.agent_harness import USER, ProbeTool, agent_harness, plugin, request_texts, text

NOTE = {"content": [text("note")], "source": plugin("notes"), "meta": {"card": 1}}
PREFIX = {"content": [text("prefix")], "source": plugin("refs"), "placement": "prompt-prefix"}


class QueuedRecorder:
    def __init__(self) -> None:
        self.steering: list[bool] = []

    @hookimpl
    def dsh_agent_queued(self, info):
        self.steering.append(info["steering"])


class SubmitRecorder:
    def __init__(self) -> None:
        self.prompts: list = []

    @hookimpl
    def dsh_prompt_submit(self, content):
        self.prompts.append(content)


async def test_a_steer_during_a_tool_joins_the_next_step(tmp_path):
    submits = SubmitRecorder()
    probe = ProbeTool(lambda _: h.agent.steer("also this"))
    script = [tool_call_response("call-1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[probe, submits]) as h:
        await h.run("go")

        [steering] = h.of("steering/message")
        [_, step_2] = h.of("step/start")
        assert h.of("tool/result")[0].seq < steering.seq < step_2.seq
        assert steering.data == {"turn": 1, "content": [text("also this")], "source": USER}
        assert request_texts(h.requests[1])[-1] == "also this"
        assert submits.prompts == [[text("go")]]  # steering never goes through prompt admission
        assert len(h.of("turn/start")) == 1


class SteerAfterStep:
    """A post-step listener that steers once: after checkpoint (b), so the turn must continue."""

    def __init__(self) -> None:
        self.done = False

    @hookimpl
    def dsh_agent_post_step(self, agent, step):
        if not self.done:
            self.done = True
            agent.steer("from post-step", contexts=[NOTE])


async def test_steering_after_the_last_checkpoint_still_continues_the_turn(tmp_path):
    async with agent_harness(tmp_path, [text_response("a"), text_response("b")], extra=[SteerAfterStep()]) as h:
        await h.run("go")

        assert [e.data["step"] for e in h.of("step/start")] == [1, 2]
        [steering] = h.of("steering/message")
        [context] = h.of("context/message")
        assert context.seq == steering.seq + 1
        assert steering.seq < h.of("step/start")[1].seq
        assert context.data == {"content": [text("note")], "source": plugin("notes"), "meta": {"card": 1}}
        assert request_texts(h.requests[1])[-2:] == ["from post-step", "note"]


async def test_late_steering_is_requeued_with_its_contexts(tmp_path):
    recorder = QueuedRecorder()
    submits = SubmitRecorder()
    async with agent_harness(tmp_path, [text_response("a"), text_response("b")], extra=[recorder, submits]) as h:

        def steer_at_turn_end(_, event):
            if event.type == "turn/end" and event.data["turn"] == 1:
                h.agent.steer("late", contexts=[PREFIX, NOTE])

        h.session.subscribe(steer_at_turn_end)
        await h.run("first")

        # One notification: the re-enqueue is not a second queueing.
        assert recorder.steering == [False, True]
        assert h.statuses == ["running", "idle"]  # no idle between the turns
        assert h.of("steering/message") == []
        second = h.of("user/message")[1]
        assert second.data["content"] == [text("prefix"), text(PROMPT_DELIMITER), text("late")]
        assert second.data["envelope"] == {
            "displayContent": [text("late")],
            "prefixContexts": [{"source": plugin("refs")}],
        }
        [context] = h.of("context/message")
        assert context.seq == second.seq + 1
        assert context.data == {"content": [text("note")], "source": plugin("notes"), "meta": {"card": 1}}
        # As an ordinary message it is admitted like any other.
        assert submits.prompts == [[text("first")], [text("late")]]


class BlockFirstAndSteer:
    @hookimpl
    def dsh_prompt_submit(self, agent, content):
        if content == [text("blocked")]:
            agent.steer("rescued", contexts=[NOTE])
            return Block("no")
        return None


async def test_steering_pending_at_a_block_becomes_the_next_turn(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")], extra=[BlockFirstAndSteer()]) as h:
        await h.run("blocked")

        assert h.turn_ends() == [{"kind": "rejected", "reason": "no"}, {"kind": "completed"}]
        assert [e.data["content"] for e in h.of("user/message")] == [[text("rescued")]]
        assert [e.data["content"] for e in h.of("context/message")] == [[text("note")]]
        assert request_texts(h.requests[0]) == ["rescued", "note"]


async def test_steering_queued_before_the_turn_opens_joins_step_one(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        h.agent.on_status(lambda status: status == "running" and h.agent.steer("early", contexts=[NOTE]))
        await h.run("go")

        assert h.types()[:5] == [
            "turn/start",
            "user/message",
            "steering/message",
            "context/message",
            "step/start",
        ]
        assert request_texts(h.requests[0]) == ["go", "early", "note"]
        assert len(h.requests) == 1
