"""Agent loop overhead: whole turns against bare appends and flushes of the same events.

`agent_turns`: turns per second of the real agent loop (inbox, placement, request building,
streaming, assembly, checkpoint flushes) with the scripted model replying a 200-token text,
against appending exactly the events those turns logged to a fresh session with
`Session.append`, flushing where the loop flushes: before the model call, after the step and at
the turn's end. Both sides then do the same store work, and the ratio is the loop's own cost
per logged event. The model's replies (its chunk lists) are built before timing, as the
baseline's events are.

The scripted model yields to the event loop once per `CHUNKS_PER_READ` chunks, as the HTTP
adapter does once per socket read: when the reader is the slower side (what a throughput figure
measures) one read brings many server-sent events, and parsing them takes no await.
`agent_turns_yield_per_chunk` (no goal) times the same turns with one event-loop pass per chunk,
the cost of Python's async machinery a stream trickling one event per read would add.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

from bench.timing import Figure, interleaved
from dsh_host import Agent
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.models.scripted import ScriptedAdapter, text_response

TURNS = 20
CHUNKS_PER_READ = 16  # about 3 KB of OpenAI-style text-delta events per read
# About 200 tokens under the 4-characters-a-token estimate; one stream delta per character.
REPLY = ("The store keeps each session's surface materialised, so reads follow the surface. " * 10)[:800]


def _host(home: Path) -> Host:
    return Host.start(load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": ""}, cwd=home))


def _script() -> list:
    """The model's replies, one per turn (the adapter plays a copy of the list)."""
    return [text_response(REPLY) for _ in range(TURNS)]


async def _agent_turns(host: Host, script: list, chunks_per_read: int = CHUNKS_PER_READ) -> list:
    session = host.sessions.create(str(host.data_dir))
    adapter = ScriptedAdapter(script, chunks_per_read=chunks_per_read)
    agent = Agent(host, session, provider="scripted", model="scripted", adapter=adapter)
    for index in range(TURNS):
        agent.send([{"type": "text", "text": f"question {index}"}])
        await agent.wait_idle()
    await agent.dispose()
    return list(session.events)


def _checkpoints(events: list) -> list[bool]:
    """Whether the loop flushed right after each event: before a step's first chunk (the
    request's header is durable before the call), after the step's answer, at the turn's end."""
    flags = []
    for event, following in zip(events, [*events[1:], None], strict=True):
        opens_stream = event.type != "assistant/chunk" and getattr(following, "type", None) == "assistant/chunk"
        flags.append(opens_stream or event.type in ("assistant/message", "turn/end"))
    return flags


async def _bare_appends(host: Host, events: list, checkpoints: list[bool]) -> None:
    session = host.sessions.create(str(host.data_dir))
    for event, checkpoint in zip(events, checkpoints, strict=True):
        session.append(event.type, event.data, surface_op=event.surface_op, sources=event.source_event_seqs)
        if checkpoint:
            await host.sessions.flush(session)


def figures(workdir: Path) -> Iterator[Figure]:
    host = _host(workdir / "agent")
    try:
        script = _script()
        logged = asyncio.run(_agent_turns(host, script))  # a warm-up, whose events the baseline appends
        for event in logged:
            event.data  # noqa: B018 - parsed before timing: the baseline appends data it already holds
        checkpoints = _checkpoints(logged)
        # Alternating rounds, so load on a shared machine drifting during the run weighs on both.
        bare_time, agent_time, per_chunk_time = interleaved(
            lambda: asyncio.run(_bare_appends(host, logged, checkpoints)),
            lambda: asyncio.run(_agent_turns(host, script)),
            lambda: asyncio.run(_agent_turns(host, script, chunks_per_read=1)),
            rounds=5,
            repeat=2,
        )
        per_turn = len(logged) // TURNS
        yield Figure.timed(
            "agent_turns",
            agent_time,
            bare_time,
            per=TURNS,
            unit="turns/s",
            target=1.5,
            note=(
                f"{TURNS} scripted turns of a 200-token reply (~{per_turn} events each, {CHUNKS_PER_READ} chunks "
                "per read) through the agent loop vs Session.append of the same events, flushed where the loop flushes"
            ),
        )
        yield Figure.timed(
            "agent_turns_yield_per_chunk",
            per_chunk_time,
            bare_time,
            per=TURNS,
            unit="turns/s",
            note="the same turns with the model yielding to the event loop at every chunk (one read per event)",
        )
    finally:
        host.close()
