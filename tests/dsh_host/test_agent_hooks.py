"""The agent's lifecycle, step and turn hooks, each called through a throwaway plugin class."""

from __future__ import annotations

import asyncio

import pytest

from dsh_host import Agent, Continue, Stop, hookimpl
from dsh_host.models.base import ModelFailure
from dsh_host.models.scripted import max_tokens_response, text_response, tool_call_response
from dsh_host.session.frozen import thaw
from dsh_host.session.session import Session
from tests.dsh_host.agent_harness import (
    ProbeTool,
    agent_harness,
    fixed_session,
    plugin,
    request_texts,
    start_host,
    text,
)

# --- lifecycle: created, session-start, status, cancel-requested, disposed -----------------------


class Lifecycle:
    """Records every lifecycle notification, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def dsh_agent_created(self, agent):
        self.seen.append(f"created:{agent.status}")

    @hookimpl
    def dsh_agent_session_start(self, agent, source):
        self.seen.append(f"session-start:{source}")

    @hookimpl
    def dsh_agent_status(self, agent, status):
        self.seen.append(f"status:{status}")

    @hookimpl
    def dsh_agent_disposed(self, agent):
        self.seen.append(f"disposed:{agent.status}")


async def test_lifecycle_notifications_in_order(tmp_path):
    life = Lifecycle()
    async with agent_harness(tmp_path, [text_response("one"), text_response("two")], extra=[life]) as h:
        assert life.seen == ["created:idle", "session-start:startup"]
        h.agent.send("a")
        h.agent.send("b")
        await h.agent.wait_idle()
        assert life.seen[2:] == ["status:running", "status:idle"]  # no idle between two queued turns
    assert life.seen[-2:] == ["status:disposed", "disposed:disposed"]
    await h.agent.dispose()
    assert life.seen.count("disposed:disposed") == 1


class Seed:
    def __init__(self) -> None:
        self.sources: list[str] = []

    @hookimpl
    def dsh_agent_session_start(self, agent, source):
        self.sources.append(source)
        agent.inject("seed context", source=plugin("seed"))


async def test_session_start_says_resume_and_seeds_context_for_the_first_request(tmp_path):
    session = fixed_session(tmp_path)
    seed = Seed()
    async with agent_harness(tmp_path, [text_response("a")], session=session) as first:
        await first.run("one")
        before = session.seq
        async with agent_harness(tmp_path, [text_response("b")], host=first.host, session=session, extra=[seed]) as h:
            assert seed.sources == ["resume"]
            await h.run("two")

            injection = [e.type for e in session.events[before : before + 3]]
            assert injection == ["turn/start", "context/message", "turn/end"]  # a one-shot turn of its own
            assert request_texts(h.requests[0])[-2:] == ["seed context", "two"]


class CancelWatch:
    def __init__(self, name: str, seen: list[str], *, send: bool = False, fail: bool = False) -> None:
        self.name, self.seen, self.send, self.fail = name, seen, send, fail

    @hookimpl
    def dsh_agent_cancel_requested(self, agent, cause):
        self.seen.append(f"{self.name}:{cause['kind']}")
        with pytest.raises(TypeError):
            cause["kind"] = "changed"  # frozen
        if self.send:
            agent.send("sent while cancelling")
        if self.fail:
            raise RuntimeError("watcher broke")


async def test_cancel_requested_is_contained_and_clears_what_listeners_queue(tmp_path):
    seen: list[str] = []
    watchers = [CancelWatch("second", seen), CancelWatch("first", seen, send=True, fail=True)]
    async with agent_harness(tmp_path, [], extra=watchers) as h:
        h.agent.cancel()  # idle, nothing queued: not effective
        assert seen == []
        h.agent.send("one")
        h.agent.cancel({"kind": "parent"})
        await h.agent.wait_idle()

        assert seen == ["first:parent", "second:parent"]  # the throwing one did not starve the other
        assert h.session.events == () and h.requests == []
        h.agent.cancel({"kind": "parent"})
        assert seen == ["first:parent", "second:parent"]


async def test_cancel_requested_during_a_turn_clears_steering_its_listener_adds(tmp_path):
    class SteerWhileCancelling:
        def __init__(self) -> None:
            self.causes: list[str] = []

        @hookimpl
        def dsh_agent_cancel_requested(self, agent, cause):
            self.causes.append(cause["kind"])
            agent.steer("steered while cancelling")

    watch = SteerWhileCancelling()
    probe = ProbeTool(lambda _: h.agent.cancel())
    async with agent_harness(tmp_path, [tool_call_response("c1", "probe", {})], extra=[probe, watch]) as h:
        await h.run("go")

        assert watch.causes == ["user"]
        assert h.turn_ends() == [{"kind": "aborted"}]
        assert h.of("steering/message") == [] and len(h.of("turn/start")) == 1


async def test_a_cancel_from_a_running_status_listener_drops_the_message_and_runs_its_replacement(tmp_path):
    class CancelOnRunning:
        def __init__(self) -> None:
            self.cancelled = False

        @hookimpl
        def dsh_agent_status(self, agent, status):
            if status == "running" and not self.cancelled:
                self.cancelled = True
                agent.cancel()
                agent.send("replacement")

    async with agent_harness(tmp_path, [text_response("ok")], extra=[CancelOnRunning()]) as h:
        await h.run("original")

        assert len(h.of("turn/start")) == 1
        assert request_texts(h.requests[0]) == ["replacement"]
        assert h.turn_ends() == [{"kind": "completed"}]


@pytest.mark.parametrize("boundary", ["turn/start", "step/start"])
async def test_a_cancel_from_a_session_event_observer_aborts_with_balanced_steps(tmp_path, boundary):
    class CancelAt:
        agent: Agent

        @hookimpl
        def dsh_session_event(self, session, event):
            if event.type == boundary:
                self.agent.cancel()

    observer = CancelAt()
    async with agent_harness(tmp_path, [text_response("never")], extra=[observer]) as h:
        observer.agent = h.agent
        await h.run("go")

        assert h.turn_ends() == [{"kind": "aborted"}]
        assert h.requests == [] and len(h.of("step/start")) == len(h.of("step/end"))


# --- step hooks: pre-step, session-prefix, request, step-result ---------------------------------


class PreStep:
    def __init__(self, name: str, seen: list[str], result=None) -> None:
        self.name, self.seen, self.result = name, seen, result

    @hookimpl
    def dsh_agent_pre_step(self, agent, turn, step, signal):
        async def run():
            self.seen.append(f"{self.name}:{turn}.{step}")
            if self.name == "inject" and step == 1:
                agent.inject("from pre-step", source=plugin("pre"))
            return self.result

        return run()


async def test_pre_step_is_serial_and_what_it_appends_joins_this_request(tmp_path):
    seen: list[str] = []
    # Call order is last registered first: "inject", then "bail", and "never" is not reached.
    plugins = [PreStep("never", seen), PreStep("bail", seen, result="stop here"), PreStep("inject", seen)]
    async with agent_harness(
        tmp_path, [tool_call_response("c1", "probe", {}), text_response("ok")], extra=[ProbeTool(), *plugins]
    ) as h:
        await h.run("go")

        assert seen == ["inject:1.1", "bail:1.1", "inject:1.2", "bail:1.2"]
        [context] = h.of("context/message")
        [step_1, _] = h.of("step/start")
        assert context.seq < step_1.seq  # outside the step, inside its request
        assert request_texts(h.requests[0]) == ["go", "from pre-step"]


async def test_a_failing_pre_step_fails_the_turn_with_the_pending_step(tmp_path):
    class Broken:
        @hookimpl
        def dsh_agent_pre_step(self):
            raise RuntimeError("pre-step broke")

    async with agent_harness(tmp_path, [], extra=[Broken()]) as h:
        await h.run("go")

        assert h.turn_ends() == [{"kind": "error", "step": 1, "message": "pre-step broke"}]
        assert h.of("step/start") == [] and h.requests == []


class Prefix:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def dsh_agent_session_prefix(self, agent, prefix, signal):
        self.calls += 1
        assert prefix == []
        return [{"role": "user", "content": [text("house rules")]}]


class PrefixWrapper:
    @hookimpl(wrapper=True)
    def dsh_agent_session_prefix(self, agent, prefix, signal):
        downstream = yield
        return [*downstream, {"role": "assistant", "content": [text("understood")]}]


async def test_session_prefix_is_composed_once_and_recorded_in_the_header(tmp_path):
    prefix = Prefix()
    async with agent_harness(
        tmp_path, [text_response("one"), text_response("two")], extra=[prefix, PrefixWrapper()]
    ) as h:
        await h.run("first")
        await h.run("second")

        assert prefix.calls == 1
        [header] = h.of("request/header")
        assert thaw(header.data["header"]["messagePrefix"]) == [
            {"role": "user", "content": [text("house rules")]},
            {"role": "assistant", "content": [text("understood")]},
        ]
        assert request_texts(h.requests[1]) == ["house rules", "understood", "first", "one", "second"]
        assert not any(
            e.type in ("user/message", "context/message") and "house" in e.to_line() for e in h.session.events
        )


async def test_an_interrupted_prefix_composition_is_recomposed_next_turn(tmp_path):
    class CancelOnce(Prefix):
        @hookimpl
        def dsh_agent_session_prefix(self, agent, prefix, signal):
            result = super().dsh_agent_session_prefix(agent, prefix, signal)
            if self.calls == 1:
                agent.cancel()
            return result

    prefix = CancelOnce()
    async with agent_harness(tmp_path, [text_response("ok")], extra=[prefix]) as h:
        await h.run("first")
        await h.run("second")

        assert prefix.calls == 2
        assert h.turn_ends() == [{"kind": "aborted"}, {"kind": "completed"}]
        assert len(h.of("step/start")) == 1


class Sampling:
    """Sets the sampling options from turn 2 on, and injects a note on the first request."""

    def __init__(self) -> None:
        self.seeds: list[dict] = []

    @hookimpl
    def dsh_agent_request(self, agent, turn, step, config, signal):
        self.seeds.append(thaw(config))
        with pytest.raises(TypeError):
            config["model"] = "changed"  # frozen
        if turn == 1:
            agent.inject("late note", source=plugin("req"))
            return None  # abstain: the host default returns the seed
        return {**config, "model": "mock-large", "temperature": 0.5, "maxTokens": 64, "stop": ["END"]}


async def test_request_config_is_logged_in_the_header_and_sent(tmp_path):
    sampling = Sampling()
    async with agent_harness(tmp_path, [text_response("one"), text_response("two")], extra=[sampling]) as h:
        await h.run("first")
        await h.run("second")

        mock = {"provider": "mock", "model": "mock"}
        assert sampling.seeds == [mock, mock]  # first from the options, then from the latest header
        headers = [thaw(e.data) for e in h.of("request/header")]
        assert [d["reason"] for d in headers] == ["initial", "change"]
        config = {"provider": "mock", "model": "mock-large", "temperature": 0.5, "maxTokens": 64, "stop": ["END"]}
        assert headers[1]["header"]["config"] == config
        second = h.requests[1]
        assert (second.model, second.temperature, second.max_tokens, list(second.stop)) == (
            "mock-large",
            0.5,
            64,
            ["END"],
        )
        assert "late note" not in request_texts(h.requests[0])  # the message boundary was already fixed
        assert "late note" in request_texts(second)
        assert h.of("assistant/message")[1].data["provenance"] == {"provider": "mock", "model": "mock-large"}


async def test_a_request_config_without_a_route_fails_the_turn(tmp_path):
    class NoModel:
        @hookimpl
        def dsh_agent_request(self, config):
            return {"provider": "mock", "model": ""}

    async with agent_harness(tmp_path, [], extra=[NoModel()]) as h:
        await h.run("go")

        [reason] = h.turn_ends()
        assert reason["kind"] == "error" and reason["step"] == 1
        assert "has no provider/model" in reason["message"] and "agent/request" in reason["message"]
        assert h.requests == [] and len(h.of("step/end")) == 1


class Shout:
    @hookimpl(wrapper=True)
    def dsh_agent_step_result(self, agent, turn, step, message, signal):
        downstream = yield
        with pytest.raises(TypeError):
            message["content"] = []  # frozen
        content = [{**b, "text": b["text"].upper()} if b["type"] == "text" else b for b in downstream["content"]]
        return {**downstream, "content": content}


async def test_step_result_rewrites_the_logged_message_and_drops_replay_state(tmp_path):
    reply = [*text_response("quiet")[:-1], {"type": "finish", "reason": {"kind": "stop"}, "replayState": "rs"}]
    async with agent_harness(tmp_path, [reply], extra=[Shout()]) as h:
        await h.run("go")

        [message] = h.of("assistant/message")
        assert message.data["content"] == [text("QUIET")]
        assert message.data["provenance"] == {"provider": "mock", "model": "mock"}


async def test_step_result_cannot_bring_back_tool_calls_on_max_tokens(tmp_path):
    class AddCall:
        @hookimpl
        def dsh_agent_step_result(self, message):
            return {**message, "content": [*message["content"], {"type": "tool-call", "id": "x", "name": "probe"}]}

    probe = ProbeTool()
    async with agent_harness(tmp_path, [max_tokens_response("cut")], extra=[AddCall(), probe]) as h:
        await h.run("go")

        assert h.of("assistant/message")[0].data["content"] == [text("cut")]
        assert probe.calls == [] and h.turn_ends() == [{"kind": "max-tokens"}]


async def test_a_failing_step_result_logs_an_empty_message_and_fails_the_turn(tmp_path):
    class Broken:
        @hookimpl
        def dsh_agent_step_result(self):
            raise RuntimeError("step-result broke")

    reply = [*text_response("hi")[:-1], {"type": "finish", "reason": {"kind": "stop"}, "replayState": "rs"}]
    async with agent_harness(tmp_path, [reply], extra=[Broken()]) as h:
        await h.run("go")

        [message] = h.of("assistant/message")
        assert message.data["content"] == [] and message.data["provenance"] == {"provider": "mock", "model": "mock"}
        assert list(message.source_event_seqs) == [e.seq for e in h.of("assistant/chunk")]
        assert h.turn_ends() == [{"kind": "error", "step": 1, "message": "step-result broke"}]


# --- turn hooks: continuation, stop ------------------------------------------------------------


class Nudge:
    """Continues once with a reminder after a step that would have stopped."""

    def __init__(self) -> None:
        self.defaults: list[object] = []

    @hookimpl
    def dsh_agent_turn_continuation(self, agent, turn, default_decision, signal):
        self.defaults.append(default_decision)
        if default_decision == Stop() and Continue() not in self.defaults[1:]:
            self.defaults.append(Continue())  # marks the nudge as given
            return Continue(content="keep going", source=plugin("nudge"))
        return None


async def test_turn_continuation_can_continue_with_steering(tmp_path):
    nudge = Nudge()
    script = [tool_call_response("c1", "probe", {}), text_response("first"), text_response("second")]
    async with agent_harness(tmp_path, script, extra=[nudge, ProbeTool()]) as h:
        await h.run("go")

        assert nudge.defaults == [Continue(), Stop(), Continue(), Stop()]
        [steering] = h.of("steering/message")
        assert steering.data == {"turn": 1, "content": [text("keep going")], "source": plugin("nudge")}
        assert len(h.requests) == 3 and request_texts(h.requests[2])[-1] == "keep going"
        assert len(h.of("turn/start")) == 1


async def test_turn_continuation_can_stop_after_tool_calls(tmp_path):
    class StopNow:
        @hookimpl
        def dsh_agent_turn_continuation(self):
            return Stop()

    async with agent_harness(tmp_path, [tool_call_response("c1", "probe", {})], extra=[StopNow(), ProbeTool()]) as h:
        await h.run("go")

        assert len(h.requests) == 1 and len(h.of("tool/result")) == 1
        assert h.turn_ends() == [{"kind": "completed"}]


async def test_a_steer_from_turn_continuation_overrides_its_stop(tmp_path):
    class SteerOnce:
        steered = False

        @hookimpl
        def dsh_agent_turn_continuation(self, agent, default_decision):
            if not self.steered:
                self.steered = True
                agent.steer("one more thing")
            return Stop()

    async with agent_harness(tmp_path, [text_response("a"), text_response("b")], extra=[SteerOnce()]) as h:
        await h.run("go")

        assert len(h.requests) == 2 and request_texts(h.requests[1])[-1] == "one more thing"


async def test_a_cancel_inside_turn_continuation_ends_the_turn_after_the_finished_step(tmp_path):
    class CancelAndContinue:
        @hookimpl
        def dsh_agent_turn_continuation(self, agent):
            agent.cancel()
            return Continue(content="never written")

    async with agent_harness(tmp_path, [text_response("a")], extra=[CancelAndContinue()]) as h:
        await h.run("go")

        assert h.turn_ends() == [{"kind": "aborted"}]
        assert len(h.requests) == 1 and h.of("steering/message") == []
        assert len(h.of("step/start")) == len(h.of("step/end")) == 1
        assert h.of("assistant/message")[0].data["content"] == [text("a")]


class TerminalStop:
    """Steers during continuation and after turn 1 closed, sends after it closed, and stops."""

    agent: Agent

    @hookimpl
    def dsh_agent_turn_continuation(self, agent):
        agent.steer("steer during continuation")

    @hookimpl
    def dsh_agent_turn_stop(self, agent, turn, signal):
        return Stop()

    @hookimpl
    def dsh_session_event(self, session, event):
        if event.type == "turn/end" and event.data["turn"] == 1:
            self.agent.steer("steer during flush")
            self.agent.send("send during flush")


async def test_a_terminal_stop_discards_steering_but_keeps_sends(tmp_path):
    stop = TerminalStop()
    async with agent_harness(tmp_path, [text_response("one"), text_response("two")], extra=[stop]) as h:
        stop.agent = h.agent
        await h.run("go")

        assert h.of("steering/message") == []
        assert len(h.of("turn/start")) == 2 and len(h.requests) == 2
        assert request_texts(h.requests[1])[-1] == "send during flush"
        assert not any("steer during" in t for r in h.requests for t in request_texts(r))


async def test_turn_stop_abstains_with_none_and_false(tmp_path):
    class Abstain:
        @hookimpl
        def dsh_agent_turn_stop(self, turn):
            return False if turn == 1 else None

    script = [tool_call_response("c1", "probe", {}), text_response("done")]
    async with agent_harness(tmp_path, script, extra=[Abstain(), ProbeTool()]) as h:
        await h.run("go")

        assert len(h.requests) == 2


# --- reports: error, session/event -------------------------------------------------------------


class Errors:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int, str]] = []

    @hookimpl
    def dsh_agent_error(self, agent, turn, step, error):
        self.seen.append((turn, step, str(error)))
        raise RuntimeError("error listener broke")  # contained


async def test_agent_error_reports_turn_failures_with_their_step(tmp_path):
    class ThrowOnFirst:
        @hookimpl
        def dsh_prompt_submit(self, content):
            if content == [text("first")]:
                raise ValueError("prompt hook broke")

    def fail(request):
        raise ModelFailure("down", "SERVER_ERROR")

    errors = Errors()
    async with agent_harness(tmp_path, [fail, text_response("ok")], extra=[errors, ThrowOnFirst()]) as h:
        h.agent.send("first")
        h.agent.send("second")
        h.agent.send("third")
        await h.agent.wait_idle()

        assert errors.seen == [(1, 0, "prompt hook broke"), (2, 1, "down")]
        assert [r["kind"] for r in h.turn_ends()] == ["error", "error", "completed"]


async def test_agent_error_reports_failed_flushes(tmp_path):
    async def broken_flush(session):
        raise OSError("disk full")

    errors = Errors()
    async with agent_harness(tmp_path, [text_response("ok")], extra=[errors]) as h:
        h.host.sessions.flush = broken_flush
        h.agent.inject("idle note")
        await h.agent.dispose()  # waits for the background flush
        assert errors.seen == [(1, 0, "disk full")]

    errors.seen.clear()
    async with agent_harness(tmp_path / "turn", [text_response("ok")], extra=[errors]) as h:
        await h.run("go")  # the step's checkpoint flushes pass; the one after turn/end fails
        h.host.sessions.flush = broken_flush
        await h.run("again")
        assert errors.seen[0][:2] == (2, 1)


class EventLog:
    def __init__(self) -> None:
        self.seen: list[tuple[int, str, bool]] = []
        self.done: list[int] = []
        self.disposing = asyncio.Event()

    @hookimpl
    def dsh_agent_status(self, agent, status):
        if status == "disposed":
            self.disposing.set()

    @hookimpl
    def dsh_session_event(self, session, event):
        self.seen.append((event.seq, event.type, session.events[-1] is event))
        if event.type == "turn/start":
            raise RuntimeError("listener broke")  # contained; the append stands
        if event.type == "turn/end":

            async def later():
                await self.disposing.wait()  # still pending when disposal begins
                self.done.append(event.seq)

            return later()
        return None


async def test_session_event_sees_every_append_after_commit(tmp_path):
    events = EventLog()
    async with agent_harness(tmp_path, [text_response("hi")], extra=[events]) as h:
        await h.run("go")
        await h.agent.dispose()

        assert [(seq, kind) for seq, kind, _ in events.seen] == [(e.seq, e.type) for e in h.session.events]
        assert all(committed for *_, committed in events.seen)
        assert events.done == [h.of("turn/end")[0].seq]  # disposal waited for the awaitable
        h.session.append("session/title", {"title": "after"})
        assert len(events.seen) == len(h.session.events) - 1  # a disposed agent publishes nothing


class SeenTypes:
    def __init__(self) -> None:
        self.types: list[str] = []

    @hookimpl
    def dsh_session_event(self, session, event):
        self.types.append(event.type)


async def test_session_event_follows_plugins_registered_and_unregistered_while_the_agent_lives(tmp_path, monkeypatch):
    publications: list[str] = []
    publish = Session._publish

    def counted(session, event):
        publications.append(event.type)
        publish(session, event)

    monkeypatch.setattr(Session, "_publish", counted)
    async with agent_harness(tmp_path, [text_response("a"), text_response("b"), text_response("c")]) as h:
        await h.run("before")
        assert publications == []  # nobody implements the hook: appends run no publication code

        late = SeenTypes()
        h.host.pm.register(late)
        await h.run("during")
        h.host.pm.unregister(late)
        await h.run("after")

        assert publications == late.types
        second_turn = h.session.events[h.of("turn/start")[1].seq : h.of("turn/start")[2].seq]
        assert late.types == [e.type for e in second_turn]


def test_notifications_outside_an_event_loop_are_not_awaited(tmp_path, caplog):
    class AsyncCreated:
        @hookimpl
        async def dsh_agent_created(self, agent):
            raise AssertionError("never awaited")

    host = start_host(tmp_path)
    try:
        host.pm.register(AsyncCreated())
        Agent(host, fixed_session(tmp_path), provider="mock", model="mock", adapter=None)
    finally:
        host.close()
    assert "returned an awaitable outside the event loop" in caplog.text
