"""Agent loop overhead: whole turns against bare appends and flushes of the same events.

`agent_turns`: turns per second of the real agent loop (inbox, placement, request building,
streaming, assembly, checkpoint flushes) with the scripted model replying a 200-token text,
against appending exactly the events those turns logged to a fresh session with
`Session.append` and one flush per turn. The ratio is the loop's own cost per logged event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

from bench.timing import Figure, best_of
from dsh_host import Agent
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.models.scripted import ScriptedAdapter, text_response

TURNS = 20
# About 200 tokens under the 4-characters-a-token estimate; one stream delta per character.
REPLY = ("The store keeps each session's surface materialised, so reads follow the surface. " * 10)[:800]


def _host(home: Path) -> Host:
    return Host.start(load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": ""}, cwd=home))


async def _agent_turns(host: Host) -> list:
    session = host.sessions.create(str(host.data_dir))
    adapter = ScriptedAdapter([text_response(REPLY) for _ in range(TURNS)])
    agent = Agent(host, session, provider="scripted", model="scripted", adapter=adapter)
    for index in range(TURNS):
        agent.send([{"type": "text", "text": f"question {index}"}])
        await agent.wait_idle()
    await agent.dispose()
    return list(session.events)


async def _bare_appends(host: Host, events: list) -> None:
    session = host.sessions.create(str(host.data_dir))
    for event in events:
        session.append(event.type, event.data, surface_op=event.surface_op, sources=event.source_event_seqs)
        if event.type == "turn/end":
            await host.sessions.flush(session)


def figures(workdir: Path) -> Iterator[Figure]:
    host = _host(workdir / "agent")
    try:
        logged: list = []

        def run_agent() -> None:
            logged[:] = asyncio.run(_agent_turns(host))

        agent_time = best_of(run_agent, repeat=5)
        bare_time = best_of(lambda: asyncio.run(_bare_appends(host, logged)), repeat=5)
        per_turn = len(logged) // TURNS
        yield Figure(
            name="agent_turns",
            value=TURNS / agent_time,
            baseline=TURNS / bare_time,
            unit="turns/s",
            higher_is_better=True,
            note=(
                f"{TURNS} scripted turns of a 200-token reply (~{per_turn} events each) through the agent loop "
                "vs Session.append + one flush per turn of the same events"
            ),
        )
    finally:
        host.close()
