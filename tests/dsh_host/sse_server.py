"""A scripted HTTP/1.1 server on loopback for testing streaming model clients.

It runs on the test's own event loop (`asyncio.start_server`, port 0), answers each request with
the next queued `Reply`, and records what it received. Replies stream their body pieces with
chunked transfer encoding, flushing each piece, so a client sees them as separate network reads.
A reply can also break the connection mid-body, or stall until the test (or teardown) releases
it, noting when the client hangs up.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal


@dataclass(frozen=True)
class Received:
    """One request the server read."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    `pieces` are sent as separate chunks of a chunked body; `body` (when `pieces` is None) is sent
    whole with a Content-Length. After the pieces, `then` decides: "end" the body properly,
    "close" the connection without ending it, or "stall" until released. `stall_first` stalls
    before anything, headers included. `after`: the reply waits for this event before anything
    is sent (a slow model the test lets go).
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    pieces: list[bytes] | None = None
    then: Literal["end", "close", "stall"] = "end"
    stall_first: bool = False
    after: asyncio.Event | None = None

    @classmethod
    def sse(cls, events: list[Any], *, then: Literal["end", "close", "stall"] = "end", **kw: Any) -> Reply:
        """An event stream, one piece per event (see `sse_event`)."""
        pieces = [sse_event(event) for event in events]
        return cls(
            headers={"content-type": "text/event-stream", **kw.pop("headers", {})},
            pieces=pieces,
            then=then,
            **kw,
        )

    @classmethod
    def json(cls, status: int, value: Any, headers: dict[str, str] | None = None) -> Reply:
        return cls(
            status=status,
            headers={"content-type": "application/json", **(headers or {})},
            body=json.dumps(value).encode(),
        )


def sse_event(event: Any) -> bytes:
    """`data: <json or text>` and the blank line that ends an event; bytes are sent verbatim."""
    if isinstance(event, bytes):
        return event
    data = event if isinstance(event, str) else json.dumps(event)
    return f"data: {data}\n\n".encode()


class SSEServer:
    """Use as `async with SSEServer() as server:`; queue replies with `server.replies.append`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self.release = asyncio.Event()
        self.arrived = asyncio.Event()  # a request was read (clear it to wait for the next one)
        self.stalled = asyncio.Event()  # a reply started stalling
        self.disconnected = asyncio.Event()  # the client hung up during a stall
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> SSEServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        assert self._server is not None
        self._server.close()
        # Closing each connection ends its handler, so none outlives the test's event loop.
        for writer in self._connections.values():
            writer.close()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            while (request := await _read_request(reader)) is not None:
                self.requests.append(request)
                self.arrived.set()
                reply = self.replies.popleft() if self.replies else Reply.json(500, {"error": "no reply queued"})
                if not await self._answer(reply, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with suppress(OSError):
                await writer.wait_closed()
            self._connections.pop(task, None)

    async def _answer(self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Send `reply`; False when the connection must close afterwards."""
        if reply.after is not None:
            await reply.after.wait()
        if reply.stall_first:
            await self._stall(reader)
            return False
        headers = dict(reply.headers)
        if reply.pieces is None:
            headers["content-length"] = str(len(reply.body))
        else:
            headers["transfer-encoding"] = "chunked"
        head = f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        writer.write(head.encode())
        if reply.pieces is None:
            writer.write(reply.body)
            await writer.drain()
            return True
        for piece in reply.pieces:
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        if reply.then == "end":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        if reply.then == "stall":
            await self._stall(reader)
        return False

    async def _stall(self, reader: asyncio.StreamReader) -> None:
        """Wait for `release`, noting whether the client closes the connection meanwhile."""
        self.stalled.set()
        hangup = asyncio.ensure_future(reader.read(1))
        released = asyncio.ensure_future(self.release.wait())
        await asyncio.wait({hangup, released}, return_when=asyncio.FIRST_COMPLETED)
        if hangup.done():
            hangup.exception()  # an EOF and a reset both mean the client hung up
            self.disconnected.set()
        hangup.cancel()
        released.cancel()


async def _read_request(reader: asyncio.StreamReader) -> Received | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed the connection between requests
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(method, path, headers, body)
