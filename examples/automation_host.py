"""A custom host for automation: two sessions, the second referencing the first.

It mounts the compaction and session-reference plugins, registers a plugin object of its own
(no entry point needed), and drives each session with `agent.submit`, printing every turn's
result. The keyless scripted model answers, so it runs anywhere:

    python examples/automation_host.py [DATA_DIR]

Without DATA_DIR the sessions live in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from dsh_host import Agent, Config, Host, TurnResult, hookimpl
from dsh_session_reference import format_mention


class Audit:
    """This host's own plugin: it notes every agent the host creates."""

    def __init__(self) -> None:
        self.sessions: list[str] = []

    @hookimpl
    def dsh_agent_created(self, agent: Agent) -> None:
        self.sessions.append(agent.session.id)


def show(label: str, result: TurnResult) -> None:
    print(f"{label}: session {result.session_id} turn {result.turn} {result.reason}: {result.text}")


async def automate(data_dir: str) -> None:
    config = Config.from_mapping(
        {"host": {"plugins": ["compact", "session-reference"], "data_dir": data_dir, "model": "scripted"}}
    )
    audit = Audit()
    async with Host.start(config, plugins={"audit": audit}) as host:
        research = await host.open_agent(cwd=data_dir)
        show("research", await research.submit("List three risks of shipping on a Friday."))
        await research.close()

        # The mention markup names the first session; session-reference turns it into a context
        # (a snapshot of that session) when the message is composed.
        mention = format_mention(research.session.id, "the risk review")
        summary = await host.open_agent(cwd=data_dir)
        show("summary", await summary.submit(f"Summarize {mention} in one sentence."))
        show("summary", await summary.submit("Thanks. Anything else?"))
        await summary.close()
    print(f"agents created: {len(audit.sessions)}")


def main(argv: list[str]) -> None:
    if argv:
        asyncio.run(automate(argv[0]))
        return
    with tempfile.TemporaryDirectory() as data_dir:
        asyncio.run(automate(data_dir))


if __name__ == "__main__":
    main(sys.argv[1:])
