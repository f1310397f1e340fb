"""Automatic compaction through the real agent loop, with the scripted model."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_compact.pairing import balanced_after, balanced_before
from dsh_compact.summarizer import COMPACTION_INSTRUCTION
from dsh_host.agent.agent import Agent
from dsh_host.hookspecs import hookimpl
from dsh_host.host import Host
from dsh_host.models.base import ModelFailure, ModelRequest
from dsh_host.models.scripted import (
    ScriptedAdapter,
    error_finish_response,
    text_response,
    tool_call_response,
)
from dsh_host.session.session import Session
from dsh_host.session.surface import classify
from dsh_host.testing import HostFactory
from dsh_host.tools.base import Tool, ToolResult

Reply = Callable[[ModelRequest], list]


class ScriptedModels:
    """A test plugin: the model provider `test` (a scripted adapter) and a `probe` tool.

    Conversation requests take the next reply in `replies`; compaction requests are answered
    by `summary`, so the order of the two kinds does not have to be scripted.
    """

    def __init__(self, replies: list, summary: str, window: int) -> None:
        self.replies = deque(replies)
        self.summary = summary
        self.adapter = ScriptedAdapter([self._answer] * 32, context_window=window)

    def _answer(self, request: ModelRequest) -> list:
        if request.purpose == "compaction":
            return text_response(self.summary)
        reply = self.replies.popleft()
        return reply(request) if callable(reply) else reply

    @property
    def conversation_requests(self) -> list[ModelRequest]:
        return [r for r in self.adapter.requests if r.purpose != "compaction"]

    @property
    def summary_requests(self) -> list[ModelRequest]:
        return [r for r in self.adapter.requests if r.purpose == "compaction"]

    @hookimpl
    def dsh_register_models(self, register) -> None:
        register("test", lambda host: self.adapter)

    @hookimpl
    def dsh_register_tools(self, register) -> None:
        async def probe(arguments, context) -> ToolResult:
            return ToolResult.text("probe output " + "p" * 387)

        register(Tool("probe", "Probe something.", {"type": "object", "properties": {}}, probe))


async def converse(host: Host, models: ScriptedModels, prompts: list[str]) -> Session:
    host.pm.register(models, name="test-models")
    session = host.sessions.create("/work", "s1", created_at=1)
    agent = Agent.create(host, session, host.models.resolve("test:m"))
    try:
        for prompt in prompts:
            agent.send(prompt)
            await agent.wait_idle()
    finally:
        await agent.dispose()
        await host.sessions.flush(session)
    return session


def types_between(session: Session, first: int, last: int) -> list[str]:
    return [e.type for e in session.events[first + 1 : last]]


async def test_post_step_pressure_compacts_after_the_tool_results(make_host) -> None:
    models = ScriptedModels(
        [
            text_response("ok"),
            tool_call_response("c1", "probe", {}),
            text_response("done"),
        ],
        summary="TOOL CHECKPOINT",
        window=1000,
    )
    with make_host(["compact"], compact={"threshold_ratio": 0.5, "retain_tokens": 180}) as host:
        session = await converse(host, models, ["first " + "f" * 1594, "second " + "s" * 393])
    events = session.events
    start = next(e for e in events if e.type == "compact/start")
    end = next(e for e in events if e.type == "compact/end")
    assert "error" not in end.data
    # Turn 2, step 1: the call, its result, then compaction, then the step closes.
    result = next(e for e in events if e.type == "tool/result")
    step_end = next(e for e in events[end.seq :] if e.type == "step/end")
    assert result.seq < start.seq and end.seq + 1 == step_end.seq
    assert step_end.data == {"turn": 2, "step": 1}
    assert types_between(session, result.seq, start.seq) == []
    # The next step's request starts from the checkpoint.
    retry = models.conversation_requests[-1]
    assert "TOOL CHECKPOINT" in json.dumps(retry.messages)
    assert "first fff" not in json.dumps(retry.messages)
    (summary_request,) = models.summary_requests
    assert summary_request.messages[-1]["content"][0]["text"] == COMPACTION_INSTRUCTION
    assert summary_request.tools == models.conversation_requests[0].tools  # prefix reuse
    for seq in session.surface.nodes:
        if session.event(seq).data.get("source") == {"kind": "plugin", "plugin": "compact"}:
            assert balanced_before(session, seq) and balanced_after(session, seq)
    assert events[-1].type == "turn/end" and events[-1].data["reason"] == {"kind": "completed"}
    # Nothing was lost: the shadowed events are still in the log.
    assert "shadowed" in classify(events).values()


async def test_below_pressure_the_loop_never_compacts(make_host) -> None:
    models = ScriptedModels([text_response("ok"), text_response("ok again")], summary="unused", window=100_000)
    with make_host(["compact"]) as host:
        session = await converse(host, models, ["hello", "again"])
    assert not [e for e in session.events if e.type.startswith("compact/")]
    assert models.summary_requests == []


class PreStepCompaction:
    """Compacts everything before the turn's own prompt in `dsh_agent_pre_step` of turn 2."""

    def __init__(self, host: Host) -> None:
        self.host = host

    @hookimpl
    async def dsh_agent_pre_step(self, agent, turn, step, signal) -> None:
        if (turn, step) == (2, 1):
            await self.host.services.compact.compact_now(agent, retain_tokens=20, signal=signal)


async def test_a_compaction_in_pre_step_is_in_that_steps_request_without_a_header_change(make_host) -> None:
    models = ScriptedModels(
        [text_response("noted"), text_response("answered")], summary="PRE-STEP CHECKPOINT", window=100_000
    )
    with make_host(["compact"], compact={"auto": False}) as host:
        host.pm.register(PreStepCompaction(host))
        session = await converse(host, models, ["OLD HISTORY SENTINEL " + "o" * 2000, "now answer"])
    request = json.dumps(models.conversation_requests[-1].messages)
    assert "PRE-STEP CHECKPOINT" in request and "OLD HISTORY SENTINEL" not in request
    events = session.events
    end = next(e for e in events if e.type == "compact/end")
    step_start = next(e for e in events if e.type == "step/start" and e.data == {"turn": 2, "step": 1})
    assert end.seq < step_start.seq  # outside the step, inside its request
    assert [e.data["reason"] for e in events if e.type == "request/header"] == ["initial"]


def overflow_once(request: ModelRequest) -> list:
    raise ModelFailure("prompt is too long for the context window", "CONTEXT_WINDOW_EXCEEDED")


IN_BAND_OVERFLOW = error_finish_response("prompt is too long", "CONTEXT_WINDOW_EXCEEDED")


@pytest.mark.parametrize("overflow", [overflow_once, IN_BAND_OVERFLOW], ids=["thrown", "in-band"])
async def test_context_overflow_recovery_compacts_and_retries(make_host, overflow) -> None:
    models = ScriptedModels(
        [text_response("noted"), overflow, text_response("recovered")],
        summary="RECOVERY CHECKPOINT",
        window=100_000,
    )
    with make_host(["compact"]) as host:
        session = await converse(host, models, ["OLD HISTORY SENTINEL " + "o" * 2000, "now answer"])
    assert len(models.conversation_requests) == 3  # turn 1, the failed request, the retry
    assert len(models.summary_requests) == 1
    retry = json.dumps(models.conversation_requests[-1].messages)
    assert "RECOVERY CHECKPOINT" in retry
    assert "OLD HISTORY SENTINEL" not in retry
    events = session.events
    failed_end = next(e for e in events if e.type == "step/end" and e.data == {"turn": 2, "step": 1})
    retry_start = next(e for e in events if e.type == "step/start" and e.data == {"turn": 2, "step": 2})
    between = types_between(session, failed_end.seq, retry_start.seq)
    assert between == ["compact/start", "compact/summary", "user/message", "compact/end"]
    assert events[-1].type == "turn/end" and events[-1].data["reason"] == {"kind": "completed"}


async def test_overflow_without_compact_mounted_fails_the_turn(make_host) -> None:
    models = ScriptedModels([text_response("noted"), overflow_once], summary="unused", window=100_000)
    with make_host() as host:
        session = await converse(host, models, ["OLD HISTORY SENTINEL " + "o" * 2000, "now answer"])
    reason = session.events[-1].data["reason"]
    assert reason["kind"] == "error" and reason["failure"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert models.summary_requests == []


async def test_auto_false_leaves_pressure_and_overflow_alone(make_host) -> None:
    models = ScriptedModels([text_response("noted"), overflow_once], summary="unused", window=1000)
    with make_host(["compact"], compact={"auto": False}) as host:
        session = await converse(host, models, ["OLD HISTORY SENTINEL " + "o" * 4000, "now answer"])
    assert not [e for e in session.events if e.type.startswith("compact/")]
    assert session.events[-1].data["reason"]["kind"] == "error"


# --- a feature-absent host is unchanged -----------------------------------------------------------


def normalised_export(host: Host, session_id: str) -> str:
    """The session as `dsh sessions export` writes it, with every event time set to 0."""
    from dsh_host.cli.main import build_cli

    result = CliRunner().invoke(build_cli(host), ["sessions", "export", session_id], catch_exceptions=False)
    assert result.exit_code == 0
    lines = []
    for line in result.output.splitlines():
        record = json.loads(line)
        if "time" in record:
            record["time"] = 0
        lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines)


async def run_pressure_conversation(
    make_host: HostFactory, data_dir: Path, plugins: str, *, installed: bool = True
) -> str:
    """A conversation that compaction would relieve (window 1000), exported and normalised."""
    replies = [text_response("reply " + "r" * 300) for _ in range(4)]
    models = ScriptedModels(replies, summary="short", window=1000)
    with make_host([plugins] if plugins else [], data_dir=data_dir) as host:
        assert ("compact" in host.installed) is installed
        await converse(host, models, [f"prompt {i} " + "q" * 400 for i in range(4)])
        return normalised_export(host, "s1")


async def test_unmounted_compact_writes_the_same_log_as_no_compact(make_host, tmp_path, monkeypatch) -> None:
    from dsh_host import plugins

    # With compact mounted the conversation does compact: the comparison below is not vacuous.
    mounted = await run_pressure_conversation(make_host, tmp_path / "mounted", "compact")
    assert '"type":"compact/summary"' in mounted
    unmounted = await run_pressure_conversation(make_host, tmp_path / "unmounted", "")
    discover = plugins.discover
    monkeypatch.setattr(plugins, "discover", lambda: {k: v for k, v in discover().items() if k != "compact"})
    not_installed = await run_pressure_conversation(make_host, tmp_path / "not-installed", "", installed=False)
    assert unmounted == not_installed
    assert '"compact/' not in unmounted
