"""The stdio framing of `dsh mcp`: one JSON-RPC message a line each way, every request answered.

The SDK's own stdio reader validates each line with its JSON parser and drops, with nothing
but a debug log, every line that fails: the client waits forever for an answer that never
comes. Here each line gets what JSON-RPC says it should:

- valid for the SDK: passed on as it is;
- valid JSON the SDK's parser refuses, a lone surrogate escape (`"\\ud800"`) for one: parsed by
  Python's JSON, which keeps the lone surrogate as Python's strings do, and passed on;
- an object with an `id` the SDK would not answer (a request with a malformed envelope, or an
  `id` that is neither a string nor an integer, which the SDK takes for a notification):
  `-32600 Invalid Request` with that id (a malformed response is dropped with a warning: JSON-RPC
  never answers a response);
- not JSON at all, a batch, or anything else without an id: `-32700`/`-32600` with id null;
- longer than `MAX_FRAME_BYTES`: `-32600` with the id found at the frame's start, if any.

Writing never fails on a string strict UTF-8 cannot hold: a frame the SDK's serializer refuses
(a lone surrogate in an error message, say) is written with the surrogate escaped.

`serve_stdio` bounds the end: at EOF on stdin or when `stop` is set, reading stops, calls in
flight have `GRACE_SECONDS` to answer, and whatever is still running then is cancelled; the
frame in flight is then finished (a frame on stdout is whole or absent), within `END_SECONDS`
of the end's start. (The
SDK, told of the EOF at once, would answer every call in flight `Connection closed`: the
framing tells it only once they are answered, so `printf '...' | dsh mcp` gets its answers.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TypeGuard

import anyio
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.shared.message import SessionMessage
from mcp.types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from dsh_host.cli.protocol_stdio import finish_writing
from dsh_host.jsontypes import Json, JsonValue

log = logging.getLogger("dsh.mcp")

GRACE_SECONDS = 1.0
"""How long calls in flight at EOF or stop may take to answer before they are cancelled."""
END_SECONDS = 1.4
"""How long after EOF or stop the last frame may take to reach the pipe (the grace included)."""
MAX_FRAME_BYTES = 16 * 2**20
"""The longest line read as a frame; a longer one is answered `-32600` and skipped."""
_HEAD_BYTES = 2**16
"""How much of an oversized frame is kept to find its id in."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

Inbound = SessionMessage | Exception


class StdioFraming:
    """Reads frames from `reader` into the SDK's read stream; writes the SDK's messages to `writer`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.input_ended = asyncio.Event()
        """Set once no more frames will be read (EOF on stdin, or `close_input`)."""
        self._unanswered: set[RequestId] = set()
        self._all_answered = asyncio.Event()
        self._all_answered.set()

    def close_input(self) -> None:
        """Read no further frame: what is in flight may still answer."""
        self._reader.feed_eof()

    async def run(
        self,
        serve: Callable[[MemoryObjectReceiveStream[Inbound], MemoryObjectSendStream[SessionMessage]], Awaitable[None]],
    ) -> None:
        """Run `serve(read_stream, write_stream)` over the framing until it returns.

        The read stream ends at EOF on stdin; `serve` (the SDK's `Server.run`) then finishes
        and closes the write stream, and the last frames are flushed before this returns.
        """
        inbound_send, inbound = anyio.create_memory_object_stream[Inbound](0)
        outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read_frames, inbound_send)
            tasks.start_soon(self._write_frames, outbound_receive)
            await serve(inbound, outbound)

    async def _read_frames(self, inbound: MemoryObjectSendStream[Inbound]) -> None:
        async with inbound:
            while True:
                line = await self._next_line()
                if line is None:
                    self.input_ended.set()
                    await self._all_answered.wait()  # then the read stream ends, and the SDK with it
                    return
                if isinstance(line, _Oversized):
                    await self._answer(
                        _sniff_id(line.head), INVALID_REQUEST, f"frame longer than {MAX_FRAME_BYTES} bytes"
                    )
                    continue
                message = await self._message(line)
                if message is None:
                    continue
                if isinstance(message, JSONRPCRequest):
                    self._unanswered.add(message.id)
                    self._all_answered.clear()
                await inbound.send(SessionMessage(message))

    async def _next_line(self) -> bytes | _Oversized | None:
        """The next line that is not blank, an oversized one's head, or None at EOF."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                return exc.partial if exc.partial.strip() else None  # a last line without its newline
            except asyncio.LimitOverrunError as exc:
                return await self._skip_oversized(exc.consumed)
            if line.strip():
                return line

    async def _skip_oversized(self, scanned: int) -> _Oversized:
        """Discard the rest of a line longer than the reader's limit, keeping its head."""
        head = await self._reader.readexactly(scanned)
        kept = head[:_HEAD_BYTES]
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return _Oversized(kept)
            except asyncio.IncompleteReadError:
                return _Oversized(kept)
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)

    async def _message(self, line: bytes) -> JSONRPCMessage | None:
        """The SDK message a line holds, or None once the line has been answered here."""
        text = line.decode("utf-8", errors="replace")  # as the SDK's stdio reader decodes
        try:
            message = jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValidationError:
            message = None
        if message is not None and not (isinstance(message, JSONRPCNotification) and '"id"' in text):
            return message
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):
            await self._answer(None, PARSE_ERROR, "Parse error")
            return None
        if not isinstance(raw, dict):
            kind = "batches are not supported" if isinstance(raw, list) else "a message must be a JSON object"
            await self._answer(None, INVALID_REQUEST, f"Invalid Request: {kind}")
            return None
        if message is not None and "id" not in raw:
            return message  # a notification that happens to mention "id" in its params
        if "method" not in raw and ("result" in raw or "error" in raw):
            log.warning("mcp: dropped a malformed response from the client (a response is never answered)")
            return None
        if "id" in raw and not _is_request_id(raw["id"]):
            await self._answer(raw["id"], INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
            return None
        try:
            return jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError as exc:
            await self._answer(raw.get("id"), INVALID_REQUEST, f"Invalid Request: {_envelope_problems(raw, exc)}")
            return None

    async def _answer(self, request_id: JsonValue, code: int, message: str) -> None:
        """Write an error response of our own (ASCII JSON: any id, any text, valid UTF-8)."""
        frame = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        await self._write_frame(json.dumps(frame, separators=(",", ":")).encode("ascii"))

    async def _write_frames(self, outbound: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with outbound:
            async for session_message in outbound:
                message = session_message.message
                await self._write_frame(_serialized(message))
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id in self._unanswered:
                    self._unanswered.discard(message.id)
                    if not self._unanswered:
                        self._all_answered.set()
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def _write_frame(self, frame: bytes) -> None:
        """Write one frame and wait until it is all in the pipe (`stdio_streams` keeps no backlog).

        The frame enters the transport whole, in one call; cancelled while it is still going
        out, it is finished by `serve_stdio`'s end.
        """
        try:
            self._writer.writelines((frame, b"\n"))
            await self._writer.drain()
        except ConnectionError as exc:  # the client is gone: nothing left to answer
            log.debug("mcp: writing a frame: %s", exc)


class _Oversized:
    """A line longer than the frame limit, of which only the head was kept."""

    __slots__ = ("head",)

    def __init__(self, head: bytes) -> None:
        self.head = head


def _serialized(message: JSONRPCMessage) -> bytes:
    """A message as UTF-8 JSON: as the SDK writes it, or as ASCII JSON when a string holds a lone surrogate.

    A response is written straight from its result, already plain JSON values, with orjson: a
    snapshot is long text, and this spares the model a serializing pass over it.
    """
    try:
        if isinstance(message, JSONRPCResponse):
            return orjson.dumps({"jsonrpc": message.jsonrpc, "id": message.id, "result": message.result})
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
    except (ValueError, TypeError):  # a lone surrogate, which UTF-8 cannot hold (orjson says TypeError)
        return json.dumps(message.model_dump(mode="json", by_alias=True, exclude_unset=True)).encode("ascii")


def _envelope_problems(raw: Json, error: ValidationError) -> str:
    """What is wrong with a message, judged as the kind of message it looks like, in one line."""
    kind = (
        ("JSONRPCRequest" if "id" in raw else "JSONRPCNotification")
        if "method" in raw
        else ("JSONRPCError" if "error" in raw else "JSONRPCResponse")
    )
    problems = [problem for problem in error.errors() if problem["loc"][:1] == (kind,)] or error.errors()
    return "; ".join(
        f"{'.'.join(map(str, problem['loc'][1:])) or 'message'}: {problem['msg']}" for problem in problems[:3]
    )


def _is_request_id(value: object) -> TypeGuard[str | int]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _sniff_id(head: bytes) -> RequestId | None:
    """The top-level `id` of a frame from its first bytes, or None when they do not hold one."""
    text = head.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    depth, at, key_next = 0, 0, False
    while at < len(text):
        char = text[at]
        if char == '"':
            try:
                value, end = decoder.raw_decode(text, at)
            except ValueError:
                return None
            if depth == 1 and key_next:
                colon = text.find(":", end)
                if colon < 0:
                    return None
                if value == "id":
                    start = colon + 1
                    while start < len(text) and text[start] in " \t\r\n":
                        start += 1
                    try:
                        found, _ = decoder.raw_decode(text, start)
                    except ValueError:
                        return None
                    return found if _is_request_id(found) else None
                key_next, at = False, colon + 1
                continue
            at = end
            continue
        if char in "{[":
            depth += 1
            key_next = depth == 1 and char == "{"
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            key_next = True
        at += 1
    return None


async def serve_stdio(
    server: Server,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    stop: asyncio.Event,
    on_end: Callable[[], None] | None = None,
) -> None:
    """Serve `server` on the framing until EOF or `stop`, then give calls in flight a bounded grace.

    `on_end()` is called when the end begins (so calls that wait can stop waiting). The frame
    being written when the calls are cancelled is finished (`finish_writing`) before this
    returns, within `END_SECONDS` of the end's start.
    """
    loop = asyncio.get_running_loop()
    framing = StdioFraming(reader, writer)
    serving = asyncio.ensure_future(
        framing.run(lambda inbound, outbound: server.run(inbound, outbound, server.create_initialization_options()))
    )
    waits = {serving, asyncio.ensure_future(stop.wait()), asyncio.ensure_future(framing.input_ended.wait())}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        deadline = loop.time() + END_SECONDS
        if on_end is not None:
            on_end()
        if not serving.done():
            framing.close_input()
            await asyncio.wait({serving}, timeout=GRACE_SECONDS)
        if not serving.done():
            log.warning("mcp: cancelling calls still running %.1f s after the input ended", GRACE_SECONDS)
    finally:
        for waiting in waits:
            waiting.cancel()
        await asyncio.wait(waits)
    if not await finish_writing(writer, deadline):
        log.warning("mcp: the client stopped reading: the last frame is cut")
    if not serving.cancelled() and serving.exception() is not None:
        raise serving.exception()  # type: ignore[misc]
