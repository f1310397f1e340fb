"""ACP transport overhead: a prompt round trip over `dsh acp`'s agent side vs `agent.submit`.

`acp_prompt_round_trip`: the median seconds of one `session/prompt` sent by the protocol SDK's
client over a socket pair to `AcpServer` (JSON-RPC framing both ways, schema validation, the
send ticket, the committed-text chunk, the response), against `agent.submit` of the same text
on an agent of the same kind of host, in process. Both use the keyless scripted model, which
answers every prompt with the same short reply. The note gives the time the transport adds;
on a loaded machine run it more than once.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import acp

from bench.timing import Figure
from dsh_host import Config, Host
from dsh_host.acp.server import AcpServer

PROMPTS = 40
ROUNDS = 5
TEXT = "Summarize what the store keeps for each session, in one sentence."


class _Silent:
    """A client that accepts the session updates it is sent."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None


def _host(home: Path) -> Host:
    config = Config.from_mapping({"host": {"plugins": [], "data_dir": str(home)}})
    return Host.start(config, session_query=False)


async def _timed(prompt: Callable[[], Awaitable[Any]]) -> list[float]:
    """Seconds of each of `PROMPTS` round trips, with the collector paused."""
    gc.collect()
    gc.disable()
    times: list[float] = []
    try:
        for _ in range(PROMPTS):
            start = time.perf_counter()
            await prompt()
            times.append(time.perf_counter() - start)
        return times
    finally:
        gc.enable()


async def _over_acp(host: Host) -> list[float]:
    server_end, client_end = socket.socketpair()
    server_reader, server_writer = await asyncio.open_connection(sock=server_end)
    client_reader, client_writer = await asyncio.open_connection(sock=client_end)
    serving = asyncio.ensure_future(AcpServer(host).serve(server_reader, server_writer))
    client = acp.connect_to_agent(_Silent(), client_writer, client_reader)
    await client.initialize(protocol_version=1)
    session_id = (await client.new_session(cwd=str(host.data_dir), mcp_servers=[])).session_id
    blocks = [acp.text_block(text=TEXT)]
    try:
        return await _timed(lambda: client.prompt(session_id=session_id, prompt=blocks))
    finally:
        client_writer.close()
        await serving
        await client.close()
        server_writer.close()


async def _submit(host: Host) -> list[float]:
    agent = await host.open_agent(cwd=host.data_dir)
    try:
        return await _timed(lambda: agent.submit(TEXT))
    finally:
        await agent.close()


def figures(workdir: Path) -> Iterator[Figure]:
    host = _host(workdir / "acp")
    try:
        acp_times: list[float] = []
        submit_times: list[float] = []
        for _ in range(ROUNDS):  # alternating, so load drifting during the run weighs on both
            acp_times += asyncio.run(_over_acp(host))
            submit_times += asyncio.run(_submit(host))
        # The median prompt: robust to the spikes a shared, loaded machine adds to a few of them.
        over_acp, submit = statistics.median(acp_times), statistics.median(submit_times)
        yield Figure(
            name="acp_prompt_round_trip",
            value=over_acp,
            baseline=submit,
            unit="s/prompt",
            note=(
                f"session/prompt via the SDK client over a socket pair vs agent.submit of the same text, "
                f"scripted model, median of {ROUNDS} alternating runs of {PROMPTS} prompts; "
                f"the transport adds {(over_acp - submit) * 1000:.3f} ms per prompt"
            ),
        )
    finally:
        host.close()
