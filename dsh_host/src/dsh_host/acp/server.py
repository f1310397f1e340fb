"""The agent side of one ACP (Agent Client Protocol v1) connection.

The SDK's `Connection` does the framing, the JSON-RPC bookkeeping and (through its schema
models) the validation; this module only decides what each method does. It routes methods
itself instead of subclassing the SDK's agent base class, which answers unknown methods with an
empty success: here every method not served below answers `-32601 Method not found`.

A session is one fresh agent. A prompt is one `agent.send` and its `Ticket`: the ticket tells
which turn consumed the message and how it ended, so a late end of an earlier turn can never
settle a later prompt.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from acp import AGENT_METHODS, CLIENT_METHODS, PROTOCOL_VERSION, RequestError
from acp.connection import Connection
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AuthenticateRequest,
    CancelNotification,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptCapabilities,
    PromptRequest,
    PromptResponse,
    SessionNotification,
    TextContentBlock,
)
from pydantic import BaseModel, ValidationError

from dsh_host.agent.agent import Agent
from dsh_host.agent.tickets import Ticket
from dsh_host.cli.protocol_stdio import finish_writing
from dsh_host.models import ModelUnavailable
from dsh_host.session.session import Session

if TYPE_CHECKING:
    from acp.schema import ClientCapabilities, StopReason

    from dsh_host.host import Host
    from dsh_host.jsontypes import Json, JsonValue

log = logging.getLogger("dsh.acp")

SHUTDOWN_TIMEOUT = 1.5
"""Seconds the shutdown waits for agents and in-flight prompts before closing regardless."""
END_SECONDS = 1.7
"""Seconds after the shutdown starts within which the frame in flight must have reached the client."""

STOP_REASONS: Mapping[str, StopReason] = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "aborted": "cancelled",
    "disposed": "cancelled",
    "interrupted": "cancelled",
    "rejected": "cancelled",
    "dropped": "cancelled",
}
"""ACP stop reasons by `turn/end` reason kind (`error` answers a JSON-RPC error instead)."""

Handler = Callable[["JsonValue"], Awaitable[object]]
Model = TypeVar("Model", bound=BaseModel)


def invalid_params(why: str) -> RequestError:
    """`-32602 Invalid params: <why>`."""
    return RequestError(-32602, f"Invalid params: {why}")


def _validated(model: type[Model], params: JsonValue) -> Model:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc'])) or 'params'}: {error['msg']}" for error in exc.errors()
        )
        raise invalid_params(problems) from None


@dataclass
class _Prompt:
    """The one prompt in flight on a session."""

    ticket: Ticket
    cancelled: bool = False


@dataclass
class _Session:
    agent: Agent
    prompt: _Prompt | None = None
    closed: bool = False


class AcpServer:
    """Serves ACP sessions over `host`: one agent per session, many sessions per connection.

    `await serve(reader, writer)` runs one connection until the reader reaches EOF or `stop` is
    set, then settles what is in flight and disposes of every agent (the host stays open: the
    caller closes it, which flushes and closes the store).
    """

    def __init__(self, host: Host, *, agent_name: str = "dsh", agent_version: str = "") -> None:
        self.host = host
        self.agent_name = agent_name
        self.agent_version = agent_version
        self.client_capabilities: ClientCapabilities | None = None
        """What the client said it can do at `initialize`; kept, never acted on."""
        self._sessions: dict[str, _Session] = {}
        self._active: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._connection: Connection | None = None
        self._requests: dict[str, Handler] = {
            AGENT_METHODS["initialize"]: self._initialize,
            AGENT_METHODS["authenticate"]: self._authenticate,
            AGENT_METHODS["session_new"]: self._new_session,
            AGENT_METHODS["session_prompt"]: self._prompt,
        }
        self._notifications: dict[str, Handler] = {AGENT_METHODS["session_cancel"]: self._cancel}

    # --- the connection -------------------------------------------------------------------------

    async def serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, stop: asyncio.Event | None = None
    ) -> None:
        """Serve one connection on `reader`/`writer` until EOF or `stop`, then shut down."""
        connection = self._connection = Connection(handler=self.handle, writer=writer, reader=reader, listening=False)
        receiving = asyncio.ensure_future(connection.main_loop())
        waits: set[asyncio.Future[Any]] = {receiving}
        if stop is not None:
            waits.add(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            await asyncio.wait(waits)
            if not receiving.cancelled() and receiving.exception() is not None:
                log.warning("acp: the connection failed: %s", receiving.exception())
            await self._shutdown(connection, writer)

    async def handle(self, method: str, params: JsonValue, is_notification: bool) -> JsonValue:
        """Dispatch one request or notification (the SDK connection's method handler)."""
        handler = (self._notifications if is_notification else self._requests).get(method)
        if handler is None:
            if is_notification:
                return None  # a notification has no answer; an unknown one is ignored
            raise RequestError.method_not_found(method)
        task = asyncio.current_task()
        if task is not None:
            self._active.add(task)
        try:
            return await handler(params)
        finally:
            if task is not None:
                self._active.discard(task)

    async def _shutdown(self, connection: Connection, writer: asyncio.StreamWriter) -> None:
        """Settle in-flight prompts `cancelled`, dispose of the agents, close the connection, and
        let the frame in flight out whole."""
        self._closing = True
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + SHUTDOWN_TIMEOUT
        # Disposing of an agent ends its running turn `disposed`, which settles its prompt.
        closing = [asyncio.ensure_future(self._close_session(s)) for s in list(self._sessions.values())]
        if closing:
            _, late = await asyncio.wait(closing, timeout=max(deadline - loop.time(), 0))
            if late:
                # A close stuck past the bound (a tool ignoring cancellation, a store that does not
                # answer) is cancelled rather than left running into a closed loop; the host's own
                # close still flushes whatever its session holds.
                log.warning("acp: %d session(s) did not close within %.1f s", len(late), SHUTDOWN_TIMEOUT)
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=SHUTDOWN_TIMEOUT)
        # Handlers still running (a session/new finishing its agent) finish before the close; a
        # handler's response is queued on its own task right after it returns, so the close,
        # which drains the queue, writes it.
        while self._active and loop.time() < deadline:
            await asyncio.wait(set(self._active), timeout=max(deadline - loop.time(), 0))
            for session in list(self._sessions.values()):
                await self._close_session(session)
        try:
            await asyncio.wait_for(connection.close(), timeout=max(deadline - loop.time(), 0.1))
        except (asyncio.TimeoutError, OSError) as exc:
            log.warning("acp: closing the connection: %s", exc or type(exc).__name__)
        # The close may have cancelled the SDK's sender partway through a frame: the rest of it
        # still goes out, or the client would read a cut line.
        if not await finish_writing(writer, started + END_SECONDS):
            log.warning("acp: the client stopped reading: the last frame is cut")

    async def _close_session(self, session: _Session) -> None:
        if not session.closed:
            session.closed = True
            await session.agent.close()

    # --- methods --------------------------------------------------------------------------------

    async def _initialize(self, params: JsonValue) -> InitializeResponse:
        request = _validated(InitializeRequest, params)
        self.client_capabilities = request.client_capabilities
        # Version 1 whatever was asked: a client that cannot speak it disconnects.
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=False,
                prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=False),
            ),
            auth_methods=[],
            agent_info=Implementation(name=self.agent_name, version=self.agent_version),
        )

    async def _authenticate(self, params: JsonValue) -> dict[str, JsonValue]:
        _validated(AuthenticateRequest, params)
        return {}

    async def _new_session(self, params: JsonValue) -> NewSessionResponse:
        request = _validated(NewSessionRequest, params)
        if not os.path.isabs(request.cwd):
            raise invalid_params(f"cwd must be an absolute path, got {request.cwd!r}")
        # Read from the raw params: the schema silently drops entries it cannot parse.
        if params.get("additionalDirectories"):
            raise invalid_params("additionalDirectories are not supported")
        if params.get("mcpServers"):
            raise invalid_params("mcpServers are not supported")
        if self._closing:
            raise RequestError.internal_error({"details": "the server is shutting down"})
        try:
            agent = await self.host.open_agent(cwd=request.cwd)
        except ModelUnavailable as exc:
            # No session is made for a model that cannot answer, and nothing answers in its place.
            raise RequestError(-32603, f"Internal error: {exc}", {"details": str(exc)}) from None
        session = self._sessions[agent.id] = _Session(agent)
        if self._closing:
            await self._close_session(session)
        return NewSessionResponse(session_id=agent.id)

    async def _prompt(self, params: JsonValue) -> PromptResponse:
        request = _validated(PromptRequest, params)
        session = self._sessions.get(request.session_id)
        if session is None or session.closed:
            raise invalid_params(f"unknown session {request.session_id!r}")
        if session.prompt is not None:
            raise invalid_params(f"a prompt is already in flight on session {request.session_id!r}")
        # Read from the raw params: the schema silently drops blocks it cannot parse.
        for block in params.get("prompt") or ():
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind != "text":
                raise invalid_params(f"only text content blocks are supported, got {kind!r}")
        text = "".join(block.text for block in request.prompt)
        if not text.strip():
            raise invalid_params("the prompt has no text")
        agent = session.agent
        first_seq = agent.session.seq
        prompt = session.prompt = _Prompt(agent.send([{"type": "text", "text": text}]))
        try:
            result = await prompt.ticket.result()
            for chunk in committed_texts(agent.session, result.turn, first_seq):
                await self._send_chunk(request.session_id, chunk)
        finally:
            session.prompt = None
        if prompt.cancelled:
            return PromptResponse(stop_reason="cancelled")
        if result.reason == "error":
            raise RequestError(-32603, f"Internal error: turn failed: {failure_message(result.end)}")
        return PromptResponse(stop_reason=STOP_REASONS.get(result.reason, "cancelled"))

    async def _cancel(self, params: JsonValue) -> None:
        try:
            request = CancelNotification.model_validate(params)
        except ValidationError:
            return
        session = self._sessions.get(request.session_id)
        if session is None or session.prompt is None:
            return  # idle or unknown: nothing to cancel
        session.prompt.cancelled = True
        session.agent.cancel({"kind": "user"})

    async def _send_chunk(self, session_id: str, text: str) -> None:
        assert self._connection is not None
        update = AgentMessageChunk(
            session_update="agent_message_chunk", content=TextContentBlock(type="text", text=text)
        )
        notification = SessionNotification(session_id=session_id, update=update)
        await self._connection.send_notification(
            CLIENT_METHODS["session_update"], notification.model_dump(mode="json", by_alias=True, exclude_none=True)
        )


def failure_message(end: Json) -> str:
    """The message of an `error` turn end: its `failure` message, else its own `message`."""
    failure = end.get("failure")
    if isinstance(failure, Mapping) and failure.get("message"):
        return str(failure["message"])
    return str(end.get("message") or "the turn failed")


def committed_texts(session: Session, turn: int | None, first_seq: int) -> list[str]:
    """The text blocks of turn `turn`'s committed assistant messages, in log order.

    Only `assistant/message` events count: deltas, reasoning, tool calls and the partial of an
    aborted step are never committed as text. Events before `first_seq` are another prompt's.
    """
    if turn is None:
        return []
    texts: list[str] = []
    for seq in range(first_seq, session.seq):
        event = session.event(seq)
        if event.type == "assistant/message" and event.data.get("turn") == turn:
            texts.extend(block["text"] for block in event.data["content"] if block.get("type") == "text")
    return texts
