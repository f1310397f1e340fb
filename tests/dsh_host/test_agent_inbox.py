"""The inbox: one turn per send, frozen snapshots, idle steering, queued notifications."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest

from dsh_host import hookimpl
from dsh_host.agent.inbox import Inbox, snapshot_record
from dsh_host.models.scripted import text_response
from tests.dsh_host.agent_harness import USER, agent_harness, plugin, request_texts, text

SNAPSHOT_ERROR = "agent message content, source, and contexts must be losslessly JSON-serializable"


class QueuedRecorder:
    def __init__(self, react=None) -> None:
        self.seen: list[tuple] = []
        self.react = react

    @hookimpl
    def dsh_agent_queued(self, agent, content, info):
        self.seen.append((content, info))
        if self.react is not None:
            self.react(agent, content)


async def test_two_sends_in_one_tick_are_two_turns(tmp_path):
    async with agent_harness(tmp_path, [text_response("first answer"), text_response("second answer")]) as h:
        h.agent.send("one")
        h.agent.send("two")
        assert h.agent.status == "idle"  # running is entered by the driver, not by send
        await h.agent.wait_idle()

        starts = h.of("turn/start")
        assert [e.data["turn"] for e in starts] == [1, 2]
        assert [e.data["content"] for e in h.of("user/message")] == [[text("one")], [text("two")]]
        assert request_texts(h.requests[1]) == ["one", "first answer", "two"]
        assert h.statuses == ["running", "idle"]
        # Turn 2 opened only after turn 1 closed (and was flushed).
        end_1 = h.of("turn/end")[0]
        assert starts[1].seq == end_1.seq + 1


async def test_turn_numbers_come_from_the_log(tmp_path):
    async with agent_harness(tmp_path, [text_response("ok")]) as h:
        h.agent.inject("seed note")
        await h.run("hello")

        assert [e.data["turn"] for e in h.of("turn/start")] == [1, 2]
        assert h.of("turn/start")[1].data["trigger"] == {"kind": "message", "source": USER}


async def test_mutating_after_send_changes_nothing_and_the_record_is_frozen(tmp_path):
    recorder = QueuedRecorder()
    content = [text("original")]
    source = {"kind": "plugin", "plugin": "caller"}
    contexts = [{"content": [text("ctx")], "source": plugin("notes")}]
    async with agent_harness(tmp_path, [text_response("ok")], extra=[recorder]) as h:
        h.agent.send(content, source=source, contexts=contexts)
        content[0]["text"] = "mutated"
        content.append(text("more"))
        source["plugin"] = "someone-else"
        contexts[0]["content"][0]["text"] = "mutated ctx"
        contexts.append({"content": [text("late")], "source": USER})
        await h.agent.wait_idle()

        [(queued_content, info)] = recorder.seen
        assert queued_content == [text("original")]
        assert info["source"] == plugin("caller")
        assert info["contexts"] == [{"content": [text("ctx")], "source": plugin("notes")}]
        assert h.of("user/message")[0].data["content"] == [text("original")]
        assert h.of("turn/start")[0].data["trigger"]["source"] == plugin("caller")
        assert request_texts(h.requests[0]) == ["original", "ctx"]
        with pytest.raises(TypeError):
            queued_content.append(text("x"))
        with pytest.raises(TypeError):
            queued_content[0]["text"] = "x"
        with pytest.raises(TypeError):
            info["steering"] = True
        with pytest.raises(TypeError):
            info["contexts"][0]["source"]["plugin"] = "x"


def test_a_record_is_frozen_whole():
    record = snapshot_record([text("a")], None, ({"content": [text("c")], "source": USER, "meta": None},))

    assert record.source == USER
    assert record.contexts[0]["meta"] is None  # null is a value, kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.content = []  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.contexts.append({})
    with pytest.raises(TypeError):
        record.contexts[0]["content"].clear()


@pytest.mark.parametrize(
    ("content", "source", "contexts"),
    [
        ([text("ok"), {"type": "text", "text": math.nan}], None, ()),
        ([text("ok")], {"kind": "plugin", "plugin": object()}, ()),
        ([text("ok")], None, [{"content": [text("c")], "source": USER, "meta": {1: "int key"}}]),
        ([text("ok")], None, [{"content": (text("tuple"),), "source": USER}]),
        ([{"type": "text", "text": "x", "n": -0.0}], None, ()),
        ([text("ok")], None, {"not": "a list"}),
    ],
)
async def test_invalid_send_raises_and_logs_nothing(tmp_path, content, source, contexts):
    recorder = QueuedRecorder()
    async with agent_harness(tmp_path, [text_response("later")], extra=[recorder]) as h:
        with pytest.raises(TypeError, match="losslessly JSON-serializable") as raised:
            h.agent.send(content, source=source, contexts=contexts)
        assert str(raised.value) == SNAPSHOT_ERROR
        await h.agent.wait_idle()
        assert recorder.seen == []
        assert h.session.events == ()
        assert h.statuses == []

        await h.run("valid")
        assert h.turn_ends() == [{"kind": "completed"}]


async def test_cyclic_content_is_rejected(tmp_path):
    block = text("loop")
    block["self"] = block
    async with agent_harness(tmp_path) as h:
        with pytest.raises(TypeError, match="losslessly JSON-serializable"):
            h.agent.send([block])
        assert h.session.events == ()


async def test_queued_info_for_a_default_send(tmp_path):
    recorder = QueuedRecorder()
    async with agent_harness(tmp_path, [text_response("ok")], extra=[recorder]) as h:
        await h.run("hi")

        [(content, info)] = recorder.seen
        assert content == [text("hi")]
        assert info == {"source": USER, "contexts": [], "steering": False}


async def test_a_queued_listener_that_sends_gets_the_next_turn(tmp_path):
    def nested(agent, content):
        if content == [text("outer")]:
            agent.send("nested")

    recorder = QueuedRecorder(nested)
    async with agent_harness(tmp_path, [text_response("a"), text_response("b")], extra=[recorder]) as h:
        await h.run("outer")

        assert [e.data["content"] for e in h.of("user/message")] == [[text("outer")], [text("nested")]]
        assert [e.data["turn"] for e in h.of("turn/end")] == [1, 2]


class Failing:
    @hookimpl
    def dsh_agent_queued(self):
        raise RuntimeError("observer broke")


class AsyncObserver:
    def __init__(self) -> None:
        self.seen: list = []

    @hookimpl
    def dsh_agent_queued(self, content):
        async def observe():
            self.seen.append(content)
            raise RuntimeError("async observer broke")

        return observe()


async def test_a_failing_queued_listener_starves_no_one(tmp_path, caplog):
    recorder = QueuedRecorder()
    observer = AsyncObserver()
    # Registered last, so pluggy calls it first: the others must still be notified.
    async with agent_harness(tmp_path, [text_response("ok")], extra=[recorder, observer, Failing()]) as h:
        await h.run("hi")

        assert len(recorder.seen) == 1
        assert observer.seen == [[text("hi")]]
        assert h.turn_ends() == [{"kind": "completed"}]
    assert "observer broke" in caplog.text
    assert "async observer broke" in caplog.text


async def test_idle_steer_is_a_send(tmp_path):
    recorder = QueuedRecorder()
    async with agent_harness(tmp_path, [text_response("a"), text_response("b")], extra=[recorder]) as h:
        h.agent.steer("first")
        h.agent.steer("second")
        await h.agent.wait_idle()

        assert [info["steering"] for _, info in recorder.seen] == [False, False]
        assert [e.data["content"] for e in h.of("user/message")] == [[text("first")], [text("second")]]
        assert h.of("steering/message") == []
        assert [e.data["turn"] for e in h.of("turn/end")] == [1, 2]


async def test_driving_a_disposed_agent_raises(tmp_path):
    async with agent_harness(tmp_path) as h:
        await h.agent.dispose()

        for verb in (h.agent.send, h.agent.steer, h.agent.inject):
            with pytest.raises(RuntimeError, match='agent "s1" is disposed'):
                verb("hi")
        h.agent.cancel()  # never raises
        assert h.agent.status == "disposed"
        await h.agent.wait_idle()
        assert h.statuses == ["disposed"]


async def test_send_needs_a_running_loop(tmp_path):
    async with agent_harness(tmp_path) as h:

        def outside_the_loop():
            with pytest.raises(RuntimeError, match="no running event loop"):
                h.agent.send("hi")

        await asyncio.to_thread(outside_the_loop)
        await h.agent.wait_idle()  # nothing was queued
        assert h.session.events == ()


async def test_inbox_wait_returns_on_enqueue_or_close():
    inbox = Inbox()
    # The wait is driven by hand: `send(None)` runs it until it parks on the future it awaits, and
    # a wake-up resolves that future at once, so each check is exact with no scheduler round.
    waiting = inbox.wait_for_queued()
    parked = waiting.send(None)
    inbox.steer(snapshot_record("s", None, ()))
    assert not parked.done()  # steering never wakes the driver
    inbox.enqueue(snapshot_record("q", None, ()))
    assert parked.done()
    with pytest.raises(StopIteration):  # resumed, the wait returns
        waiting.send(None)

    inbox.dequeue()
    waiting = inbox.wait_for_queued()
    parked = waiting.send(None)
    inbox.close()
    assert parked.done()
    with pytest.raises(StopIteration):
        waiting.send(None)
    assert [r.content for r in inbox.drain_steering()] == [[text("s")]]
