"""Helpers for agent tests: a host, a session on a fixed clock, and a checked scripted model.

Every request the agent sends goes through `CheckingAdapter`, which rebuilds the request from
the session log alone (`rebuild_request` at the latest `step/start`) and compares the two; a
mismatch fails the request and, at the end of `agent_harness`, the test. So every agent test
also proves "model-visible means logged" for every request it makes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_host import Agent, hookimpl
from dsh_host.host import Host
from dsh_host.log import rebuild_request, request_json
from dsh_host.models.base import JsonDict, ModelRequest
from dsh_host.models.scripted import ScriptedAdapter, ScriptEntry
from dsh_host.session.events import Event, SessionHeader
from dsh_host.session.frozen import thaw
from dsh_host.session.session import Session
from dsh_host.testing import HostFactory
from dsh_host.tools.base import Tool, ToolContext, ToolResult

T = 1_700_000_000_000
"""The fixed clock of harness sessions: every event's time."""
SYSTEM = "You are an AI agent powered by the DeepSeek Harness SDK."
USER = {"kind": "user"}


def text(value: str) -> JsonDict:
    return {"type": "text", "text": value}


def plugin(name: str) -> JsonDict:
    return {"kind": "plugin", "plugin": name}


class CheckingAdapter:
    """Wraps a scripted model; each request must equal the one rebuilt from the log."""

    def __init__(self, inner: ScriptedAdapter, session: Session) -> None:
        self.inner = inner
        self.session = session
        self.checked = 0
        self.mismatches: list[str] = []

    @property
    def requests(self) -> list[ModelRequest]:
        return self.inner.requests

    def context_window(self, model: str) -> int | None:
        return self.inner.context_window(model)

    def stream(self, request: ModelRequest) -> AsyncIterator[JsonDict]:
        events = self.session.events
        step_start = next(e.seq for e in reversed(events) if e.type == "step/start")
        expected = rebuild_request(events, step_start)
        actual = request_json(request)
        self.checked += 1
        if actual != expected:
            self.mismatches.append(f"request {self.checked}:\n sent {actual}\n logged {expected}")
            raise AssertionError(self.mismatches[-1])
        return self.inner.stream(request)


class ProbeTool:
    """A plugin with one tool, `probe`, that runs `during(arguments)` inside its body.

    `during` may be async; its result (when a ToolResult) becomes the tool's result.
    """

    def __init__(self, during: Callable[[Any], Any] | None = None, name: str = "probe") -> None:
        self.during = during
        self.name = name
        self.calls: list[Any] = []

    @hookimpl
    def dsh_register_tools(self, register):
        register(Tool(name=self.name, description="test probe", parameters={"type": "object"}, run=self.run))

    async def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        self.calls.append(arguments)
        result = self.during(arguments) if self.during is not None else None
        if hasattr(result, "__await__"):
            result = await result
        return result if isinstance(result, ToolResult) else ToolResult.text("probed")


@dataclass
class Harness:
    """One agent under test and what it touched."""

    host: Host
    session: Session
    model: CheckingAdapter
    agent: Agent
    statuses: list[str] = field(default_factory=list)

    @property
    def requests(self) -> list[ModelRequest]:
        return self.model.requests

    def types(self, *, chunks: bool = False) -> list[str]:
        """Event types in log order (stream chunks left out unless asked for)."""
        return [e.type for e in self.session.events if chunks or e.type != "assistant/chunk"]

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.session.events if e.type == kind]

    def lines(self) -> list[str]:
        return [e.to_line() for e in self.session.events]

    def turn_ends(self) -> list[Any]:
        return [thaw(e.data["reason"]) for e in self.of("turn/end")]

    async def run(self, content: Any, **options: Any) -> None:
        """Send one message and wait until the agent is idle again."""
        self.agent.send(content, **options)
        await self.agent.wait_idle()


def request_texts(request: ModelRequest) -> list[str]:
    """The text blocks of a request's messages, in order."""
    return [b["text"] for m in request.messages for b in m["content"] if b.get("type") == "text"]


def golden(lines: str) -> list[str]:
    """Compact log lines from expected JSON lines (one event a line, `T` standing for the time)."""
    out = []
    for line in lines.strip().splitlines():
        event = json.loads(line.replace(":T,", f":{T},"))
        out.append(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
    return out


def start_host(tmp_path: Path, plugins: str = "") -> Host:
    """A host with its data under `tmp_path` and only the named plugins mounted; the caller closes it."""
    return HostFactory(tmp_path)([name for name in plugins.split(",") if name], data_dir=tmp_path / "dsh-home")


def fixed_session(cwd: Path, session_id: str = "s1") -> Session:
    """A bare session (no title listener) whose events all carry time `T`."""
    return Session(SessionHeader(id=session_id, created_at=T, cwd=str(cwd)), clock=lambda: T)


@asynccontextmanager
async def agent_harness(
    tmp_path: Path,
    script: Sequence[ScriptEntry] = (),
    *,
    plugins: str = "",
    extra: Sequence[object] = (),
    system: str | None = SYSTEM,
    host: Host | None = None,
    session: Session | None = None,
    **agent_options: Any,
) -> AsyncIterator[Harness]:
    """An agent (provider and model `mock`) over a fixed-clock session, disposed at the end.

    `plugins` are mounted by name; `extra` plugin objects are registered on the host's plugin
    manager before the agent collects its tools. On a clean exit the harness asserts that
    every request matched its rebuild from the log.
    """
    owned = host is None
    host = host if host is not None else start_host(tmp_path, plugins)
    try:
        for obj in extra:
            host.pm.register(obj)
        session = session if session is not None else fixed_session(tmp_path)
        model = CheckingAdapter(ScriptedAdapter(list(script)), session)
        agent = Agent(host, session, provider="mock", model="mock", adapter=model, system=system, **agent_options)
        harness = Harness(host, session, model, agent)
        agent.on_status(harness.statuses.append)
        try:
            yield harness
        finally:
            await agent.dispose()
        assert model.mismatches == []
        assert model.checked == len(model.requests)
    finally:
        for obj in extra:
            host.pm.unregister(obj)
        if owned:
            host.close()
