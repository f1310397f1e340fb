"""A host process the crash tests kill with SIGKILL (not a test module).

`python agent_crash_runner.py DATA_DIR request|tool` runs one agent turn on session "crash"
and blocks forever at the chosen point, printing a line to stdout once it is there:
`request` blocks inside the model call, `tool` inside a tool body.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from dsh_host import Agent, hookimpl
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.models.scripted import tool_call_response
from dsh_host.tools.base import Tool, ToolResult


def reached(point: str) -> None:
    print(point, flush=True)


class BlockingModel:
    """Replies with one tool call, or blocks inside the request, as the mode says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def context_window(self, model: str) -> int | None:
        return None

    async def stream(self, request):
        if self.mode == "request":
            reached("in request")
            await asyncio.Event().wait()
        for chunk in tool_call_response("call-1", "block", {"why": "crash test"}):
            yield chunk


class BlockingTool:
    @hookimpl
    def dsh_register_tools(self, register):
        async def run(arguments, context):
            reached("in tool")
            await asyncio.Event().wait()
            return ToolResult.text("unreachable")

        register(Tool("block", "Blocks forever.", {"type": "object", "properties": {}}, run))


async def main(data_dir: str, mode: str) -> None:
    host = Host.start(load_config(env={"DSH_HOME": data_dir, "DSH_LOAD_PLUGINS": ""}, cwd=Path(data_dir)))
    host.pm.register(BlockingTool())
    session = host.sessions.create(data_dir, "crash")
    agent = Agent(host, session, provider="scripted", model="scripted", adapter=BlockingModel(mode))
    agent.send([{"type": "text", "text": "please crash"}])
    await agent.wait_idle()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
