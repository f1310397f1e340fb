"""Helpers for the `dsh acp` tests: a scripted host, an in-process SDK client, a `dsh acp` process.

The in-process client is the SDK's own client side over a socket pair; every frame it receives
is recorded in order. The subprocess helpers read what a real `dsh acp` (run in the hermetic
environment of `tests.processes`) stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp

from dsh_host import Config, Event, Host, SqliteSessionStore
from dsh_host.acp.server import AcpServer
from tests.processes import write_script

SQLITE_FILE = "sessions.sqlite3"


def acp_host(tmp_path: Path, entries: Sequence[Any], *, plugins: Sequence[str] = ()) -> Host:
    """The host `dsh acp` composes: scripted model, store in `tmp_path`, no session query."""
    config = Config.from_mapping(
        {
            "host": {"plugins": list(plugins), "data_dir": str(tmp_path / "data")},
            "models": {"scripted": {"script": str(write_script(tmp_path, entries))}},
        }
    )
    return Host.start(config, session_query=False)


@dataclass
class Recorder:
    """An ACP client that records the session updates it is sent (it serves no request)."""

    updates: list[tuple[str, Any]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    def texts(self, session_id: str) -> list[str]:
        return [
            u.content.text for s, u in self.updates if s == session_id and u.session_update == "agent_message_chunk"
        ]


@dataclass
class Wire:
    """One in-process connection: the SDK client, its recorder, every frame it received."""

    client: Any
    recorder: Recorder
    frames: list[dict[str, Any]]
    server: AcpServer
    serving: asyncio.Task[None]
    close_client: Any

    async def request(self, method: str, params: Any) -> Any:
        """A raw request (for methods the SDK client has no helper for)."""
        return await self.client._conn.send_request(method, params)

    async def eof(self) -> None:
        """Close the client's end (the server sees EOF) and wait for the server to finish."""
        self.close_client()
        await self.serving


@contextlib.asynccontextmanager
async def wire(host: Host) -> AsyncIterator[Wire]:
    """Serve `host` over a socket pair to the SDK's client; EOF and shutdown at exit."""
    server_end, client_end = socket.socketpair()
    server_reader, server_writer = await asyncio.open_connection(sock=server_end)
    client_reader, client_writer = await asyncio.open_connection(sock=client_end)
    server = AcpServer(host, agent_version="test")
    serving = asyncio.ensure_future(server.serve(server_reader, server_writer))
    frames: list[dict[str, Any]] = []

    def observe(event: Any) -> None:
        if event.direction.value == "incoming":
            frames.append(event.message)

    recorder = Recorder()
    client = acp.connect_to_agent(recorder, client_writer, client_reader, observers=[observe])
    connection = Wire(client, recorder, frames, server, serving, client_writer.close)
    try:
        yield connection
    finally:
        if not serving.done():
            await connection.eof()
        await client.close()
        server_writer.close()


def agent_of(connection: Wire, session_id: str) -> Any:
    """The dsh agent behind ACP session `session_id`."""
    return connection.server._sessions[session_id].agent


def turn_ends(events: Sequence[Event]) -> list[str]:
    """The reason kind of each `turn/end`, in log order."""
    return [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]


def data_of(events: Sequence[Event], type: str) -> list[Any]:
    """The data of each event of `type`, in log order."""
    return [e.data for e in events if e.type == type]


# --- subprocesses -------------------------------------------------------------------------------


def store_events(tmp_path: Path) -> dict[str, list[Event]]:
    """Every session's durable events in the hermetic store (`DSH_HOME`), by session id."""
    path = tmp_path / "dsh" / SQLITE_FILE
    if not path.exists():
        return {}
    store = SqliteSessionStore.open(path)
    try:
        return {row.id: store.read_events(row.id)[1] for row in store.list_sessions()}
    finally:
        store.close()


def wait_for_logged(tmp_path: Path, type: str, *, count: int = 1, timeout: float = 30.0) -> str:
    """Poll the store until a session has `count` durable events of `type`; return its id.

    Synchronisation with another process, not a timing assertion: the loop makes the log
    durable before each model request, so a turn that reached its model shows up here.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for session_id, events in store_events(tmp_path).items():
            if sum(event.type == type for event in events) >= count:
                return session_id
        time.sleep(0.02)
    raise AssertionError(f"no session stored {count} {type} events within {timeout} s")
