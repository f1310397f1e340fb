"""The agent: one model conversation over one session, driven through its inbox.

The driving verbs (`send`, `steer`, `inject`, `cancel`) are synchronous and never yield: they
snapshot, queue or append, and return. A driver task, started by the first `send`, claims one
queued message per turn and runs it (`dsh_host.agent.loop.Turn`). Everything the model sees is
in the session log first, so every request can be rebuilt from the log alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, cast

from dsh_host.agent.cancel import DISPOSED, CancelSignal, resolve_cause
from dsh_host.agent.composition import Composition
from dsh_host.agent.dispatch import emit
from dsh_host.agent.errors import render_error
from dsh_host.agent.inbox import ABSENT, USER_SOURCE, Inbox, InboxRecord, as_content, snapshot_record
from dsh_host.agent.loop import CONTEXT_SNAPSHOT_ERROR, RequestHeaderLog, Turn
from dsh_host.agent.tickets import Ticket, TurnResult
from dsh_host.asyncs import resolve
from dsh_host.models.base import ModelAdapter
from dsh_host.session.events import Event
from dsh_host.session.frozen import FrozenDict, frozen_loads
from dsh_host.session.lossless import NotLosslessJson, canonical_text
from dsh_host.session.request_header import canonical_header
from dsh_host.session.session import Session
from dsh_host.tools.base import Tool

if TYPE_CHECKING:
    from dsh_host.agent.inbox import Content
    from dsh_host.host import Host
    from dsh_host.jsontypes import Json, JsonValue
    from dsh_host.models.registry import ResolvedModel

log = logging.getLogger("dsh.agent")

AgentStatus = Literal["idle", "running", "disposed"]
"""What an agent is doing: `idle`, `running` a turn, or `disposed` (closed)."""
StatusListener = Callable[[AgentStatus], None]

DEFAULT_MAX_PARALLEL_TOOLS = 10


class Agent:
    """An agent over `session`, talking to `adapter` as `provider`/`model`.

    Tools come from the `dsh_register_tools` hook, collected once when the agent is built
    (`tools`, by name); they run in `cwd`, the session's directory. `system` is the system
    prompt (None: none); changing it between turns logs a `change` header. At most
    `max_parallel_tools` tool calls of one model response run at a time.

    To follow a turn as it streams, subscribe to the session (`assistant/chunk` events carry
    the deltas) and to `on_status`; `await wait_idle()` returns when the queue is done.
    """

    def __init__(
        self,
        host: Host,
        session: Session,
        *,
        provider: str,
        model: str,
        adapter: ModelAdapter,
        system: str | None = None,
        max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS,
    ) -> None:
        if not provider or not model:
            raise ValueError(f'agent "{session.id}" has no provider/model: both must be non-empty strings')
        if isinstance(max_parallel_tools, bool) or not isinstance(max_parallel_tools, int) or max_parallel_tools < 1:
            raise ValueError(f"max_parallel_tools must be a positive integer, got {max_parallel_tools!r}")
        self.host = host
        self.session = session
        self.provider = provider
        self.model = model
        self.adapter = adapter
        self.system = system
        self.max_parallel_tools = max_parallel_tools
        self.tools: Mapping[str, Tool] = MappingProxyType(_collect_tools(host))
        # Tools work in the session's directory; a session without one uses the process's.
        self.cwd = Path(session.cwd) if session.cwd else Path.cwd()
        self._inbox = Inbox()
        self._headers = RequestHeaderLog()
        self._status: AgentStatus = "idle"
        self._status_listeners: list[StatusListener] = []
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._owner: CancelSignal | None = None
        self._pre_run_cancelled = False
        self._turn: Turn | None = None
        self._driver: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._detached = False
        # Appends publish `dsh_session_event` only while some plugin implements it.
        self._stop_publishing: Callable[[], None] | None = None
        self._stop_watching = host.pm.watch(self._follow_session_event_hook)
        self._follow_session_event_hook()
        host.sessions.attach(session, self)
        self.notify("dsh_agent_created", agent=self)
        self.notify("dsh_agent_session_start", agent=self, source="resume" if session.seq else "startup")

    @classmethod
    def create(
        cls,
        host: Host,
        session: Session,
        model: ResolvedModel,
        *,
        system: str | None = None,
        max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS,
    ) -> Agent:
        """An agent for a model resolved by `host.models.resolve(...)`; options as the constructor's."""
        return cls(
            host,
            session,
            provider=model.provider,
            model=model.model,
            adapter=model.adapter,
            system=system,
            max_parallel_tools=max_parallel_tools,
        )

    # --- state ----------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent's id: its session's."""
        return self.session.id

    @property
    def status(self) -> AgentStatus:
        """`idle`, `running` (from claiming a message until the queue is empty), or `disposed`."""
        return self._status

    @property
    def disposed(self) -> bool:
        return self._status == "disposed"

    def on_status(self, listener: StatusListener) -> Callable[[], None]:
        """Call `listener(status)` on every status change; returns an unsubscribe function.

        Listeners run synchronously; an exception is logged and contained.
        """
        self._status_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._status_listeners:
                self._status_listeners.remove(listener)

        return unsubscribe

    def request_header(self) -> dict[str, JsonValue]:
        """The agent's own part of its next request header: config, system, tools.

        The loop completes it per request: `dsh_agent_request` chooses the config and the
        session prefix (`dsh_agent_session_prefix`) becomes `messagePrefix`.
        """
        header: dict[str, JsonValue] = {"config": {"provider": self.provider, "model": self.model}}
        if self.system:
            header["system"] = self.system
        header["tools"] = [tool.schema() for tool in self.tools.values()]
        return canonical_header(header)

    # --- driving verbs --------------------------------------------------------------------------

    def send(self, content: Content, *, source: Json | None = None, contexts: Sequence[Json] = ()) -> Ticket:
        """Queue a message for a turn of its own; returns its `Ticket`.

        `content` is a list of content blocks (a string is one text block); `source` defaults to
        `{kind: 'user'}`; `contexts` ride with the message and are written with it or dropped
        with it. The message is snapshotted and frozen before this returns; TypeError (nothing
        queued) when any part is not lossless JSON.
        """
        self._check_not_disposed()
        ticket = Ticket(self.id, steering=False)
        record = snapshot_record(content, source, contexts, ticket)
        self._start_driver()
        self._inbox.enqueue(record)
        self._emit_queued(record, steering=False)
        return ticket

    def steer(self, content: Content, *, source: Json | None = None, contexts: Sequence[Json] = ()) -> Ticket:
        """Add a message to the running turn, at its next step; when not running, `send` it.

        Steering never goes through prompt admission. Steering still pending when its turn
        ends is queued as an ordinary message, contexts intact. The returned `Ticket` tells
        which turn wrote the message (`ticket.steering` is False when it was sent instead).
        """
        self._check_not_disposed()
        if self._status != "running":
            return self.send(content, source=source, contexts=contexts)
        ticket = Ticket(self.id, steering=True)
        record = snapshot_record(content, source, contexts, ticket)
        self._inbox.steer(record)
        self._emit_queued(record, steering=True)
        return ticket

    async def compose(self, text: str, *, signal: asyncio.Event | None = None) -> Composition:
        """What `submit(text)` would send: content blocks and contexts; sends nothing.

        Plugins compose through the `dsh_compose_message` hook (session mentions become
        contexts where session-reference is mounted); otherwise the text is one text block.
        A failed composition raises the feature's `DshError`. Setting `signal` abandons it.
        """
        self._check_not_disposed()
        hook = self.host.hook.dsh_compose_message
        composed = await resolve(hook(agent=self, text=text, signal=signal if signal is not None else asyncio.Event()))
        return cast("Composition", composed)

    async def submit(self, text: str, *, signal: asyncio.Event | None = None) -> TurnResult:
        """The one path from typed text to the agent: compose, then send or steer, then wait.

        Steers when a turn is running (decided after composing), sends otherwise, and returns
        the `TurnResult` of the turn that consumed the message. A failed composition raises
        and sends nothing.
        """
        composition = await self.compose(text, signal=signal)
        ticket = self.steer(list(composition.content), contexts=list(composition.contexts))
        return await ticket.result()

    async def close(self) -> None:
        """Dispose of the agent and make its session durable (`dispose` then a flush).

        The last agent of a host to close on a session ends the host's driving of it: its lease
        is given up, so another host may drive it.
        """
        await self.dispose()
        await self.host.sessions.agent_closed(self.session)

    def inject(self, content: Content, *, source: Json | None = None, meta: JsonValue = ABSENT) -> None:
        """Add a context message (content as for `send`) without running the model.

        Inside an open turn (decided from the log) it is appended at once, or after the running
        tool batch; otherwise it gets a turn of its own: `turn/start` (trigger `injection`),
        `context/message`, `turn/end`. `meta` is kept in the log and hidden from the model.
        """
        self._check_not_disposed()
        context: dict[str, JsonValue] = {
            "content": as_content(content),
            "source": source if source is not None else USER_SOURCE,
        }
        if meta is not ABSENT:
            context["meta"] = meta
        if self.session.open_turn() is not None:
            try:
                frozen = frozen_loads(canonical_text(context))
            except NotLosslessJson:
                raise TypeError(CONTEXT_SNAPSHOT_ERROR) from None
            if self._turn is not None and self._turn.batch_active:
                self._turn.defer(frozen)
            else:
                self.session.append("context/message", frozen, surface_op="append")
            return
        turn = self.session.last_turn_number() + 1
        trigger = {"kind": "injection", "source": context["source"]}
        self.session.append("turn/start", {"turn": turn, "trigger": trigger})
        try:
            self.session.append("context/message", context, surface_op="append")
        finally:
            self.session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            self._flush_in_background(turn)

    def cancel(self, cause: Json | None = None) -> None:
        """Drop every queued and steering message and interrupt the running turn. Never raises.

        `cause` is `{kind: 'user'}` (the default) or `{kind: 'parent'}`; the turn ends
        `aborted` either way. With nothing running and nothing queued this does nothing.
        """
        if self._owner is None:
            if not (self._inbox.has_queued or self._inbox.has_steering):
                return  # nothing to cancel: no notification, nothing carried over
            self._pre_run_cancelled = True
        cause = resolve_cause(cause)
        self.notify("dsh_agent_cancel_requested", agent=self, cause=cause)
        self._inbox.clear()  # after the notification: what its listeners queued goes too
        if self._owner is not None:
            self._owner.abort(cause)

    async def dispose(self) -> None:
        """Stop for good: interrupt the turn (it ends `disposed`), drop the inbox, wait for the driver.

        Safe to call more than once; every call returns once the agent has quiesced.
        """
        if self._status != "disposed":
            self._status = "disposed"
            self._inbox.close()
            self._inbox.clear()
            self._settle_idle_waiters()
            if self._owner is not None:
                self._owner.abort(DISPOSED)
            self._notify_status("disposed")
        await self._quiesce()
        if not self._detached:
            self._detached = True
            self._stop_watching()
            self._follow_session_event_hook()
            self.host.sessions.detach(self.session, self)
            self.notify("dsh_agent_disposed", agent=self)
            await self._quiesce()

    async def _quiesce(self) -> None:
        """Wait for the driver to exit and for every background flush and notification."""
        if self._driver is not None:
            await asyncio.wait({self._driver})
        while self._background:
            await asyncio.wait(set(self._background))

    async def wait_idle(self) -> None:
        """Return once the agent has nothing to do: idle with an empty queue, or disposed and stopped."""
        if self._status != "disposed":
            if self._status != "running" and not self._inbox.has_queued:
                return
            waiter = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter
        if self._status == "disposed" and self._driver is not None:
            await asyncio.wait({self._driver})

    # --- the driver -----------------------------------------------------------------------------

    def _start_driver(self) -> None:
        if self._driver is None:
            self._driver = asyncio.get_running_loop().create_task(self._drive(), name=f"dsh-agent-{self.id}")

    async def _drive(self) -> None:
        inbox = self._inbox
        while not self.disposed:
            if self._skip_cancelled_work():
                continue
            await inbox.wait_for_queued()
            if self.disposed:
                return
            if self._skip_cancelled_work():
                continue
            signal = self._owner = CancelSignal()
            self._set_status("running")
            if self.disposed:
                self._owner = None
                return
            if signal.is_set():
                # A status listener cancelled before anything was claimed.
                self._owner = None
                if not inbox.has_queued:
                    self._set_status("idle")
                    continue
                signal = self._owner = CancelSignal()
            stopped = await self._run_turn(inbox.dequeue(), signal)
            if stopped:  # after a terminal stop, late steering is discarded
                inbox.discard_steering()
            for record in inbox.drain_steering():
                inbox.enqueue(record)  # late steering becomes the next ordinary message
            if not inbox.has_queued:
                self._set_status("idle")

    async def _run_turn(self, record: InboxRecord, signal: CancelSignal) -> bool:
        """Run one turn; True when `dsh_agent_turn_stop` stopped it for good."""
        turn = self._turn = Turn(self, self.session.last_turn_number() + 1, signal, self._inbox, self._headers)
        try:
            reason = await turn.run(record)
            # Retire the owner before turn/end: a cancel from here on is not a cancel of this turn.
            self._owner = None
            await turn.close(reason)
        except Exception as exc:  # noqa: BLE001 - the driver outlives any one turn
            log.warning("agent %s: turn %d could not run: %s", self.id, turn.number, render_error(exc))
            self.notify("dsh_agent_error", agent=self, turn=turn.number, step=turn.step, error=exc)
        finally:
            self._owner = None
            self._turn = None
            # A turn that could not even close still answers its messages.
            turn.settle({"kind": "error", "step": turn.step, "message": "the turn could not run"})
        return turn.stopped

    def _skip_cancelled_work(self) -> bool:
        """After a cancel that found no turn running: settle idle, unless new work came in."""
        if not self._pre_run_cancelled:
            return False
        self._pre_run_cancelled = False
        if self._inbox.has_queued:
            return False
        self._settle_idle_waiters()
        self._set_status("idle")
        return True

    # --- status and notifications ---------------------------------------------------------------

    def _set_status(self, status: AgentStatus) -> None:
        if status == self._status or self._status == "disposed":
            return
        self._status = status
        if status != "running":
            # Before the listeners, so a throwing listener cannot strand a waiter.
            self._settle_idle_waiters()
        self._notify_status(status)

    def _notify_status(self, status: AgentStatus) -> None:
        for listener in list(self._status_listeners):
            try:
                listener(status)
            except Exception:
                log.warning("agent %s: status listener failed on %s", self.id, status, exc_info=True)
        self.notify("dsh_agent_status", agent=self, status=status)

    def _settle_idle_waiters(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _emit_queued(self, record: InboxRecord, *, steering: bool) -> None:
        info = FrozenDict(source=record.source, contexts=record.contexts, steering=steering)
        self.notify("dsh_agent_queued", agent=self, content=record.content, info=info)

    def _follow_session_event_hook(self) -> None:
        """Subscribe to the session while attached and some plugin implements `dsh_session_event`.

        Called when the agent is built, whenever a plugin is registered or unregistered, and on
        disposal: appends to a session nobody observes run no publication code at all.
        """
        wanted = not self._detached and bool(self.host.hook.dsh_session_event.get_hookimpls())
        if wanted and self._stop_publishing is None:
            self._stop_publishing = self.session.subscribe(self._publish_event)
        elif not wanted and self._stop_publishing is not None:
            self._stop_publishing()
            self._stop_publishing = None

    def _publish_event(self, session: Session, event: Event) -> None:
        # Of several agents of this host on one session, one publishes (the first still
        # attached), so a listener hears each event once.
        if self.host.sessions.leads(session, self):
            emit(
                self.host.hook.dsh_session_event,
                {"host": self.host, "session": session, "event": event},
                self._track_awaitable,
            )

    def notify(self, hook: str, **arguments: object) -> None:
        """Call the observation hook named `hook` with `arguments` on every implementation.

        Each implementation's failure is logged and contained; an awaitable it returns is
        awaited in the background (and waited for on disposal). The loop reports through this.
        """
        emit(getattr(self.host.hook, hook), arguments, self._track_awaitable)

    def _track_awaitable(self, awaitable: Awaitable[object], what: str) -> None:
        try:
            future = asyncio.ensure_future(awaitable, loop=asyncio.get_running_loop())
        except RuntimeError:
            log.warning("agent %s: %s returned an awaitable outside the event loop; not awaited", self.id, what)
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()
            return
        self._track(future, what)

    def _flush_in_background(self, turn: int) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to flush on: the events stay pending for the next flush

        async def flush() -> None:
            try:
                await self.host.sessions.flush(self.session)
            except Exception as exc:  # noqa: BLE001 - reported, never raised to the injecting caller
                log.warning("agent %s: flush after idle injection %d failed: %s", self.id, turn, render_error(exc))
                self.notify("dsh_agent_error", agent=self, turn=turn, step=0, error=exc)

        self._track(loop.create_task(flush()), f"flush after idle injection {turn}")

    def _track(self, future: asyncio.Future[Any], what: str) -> None:
        self._background.add(future)

        def done(finished: asyncio.Future[Any]) -> None:
            self._background.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                log.warning("agent %s: %s failed: %s", self.id, what, render_error(finished.exception()))

        future.add_done_callback(done)

    def _check_not_disposed(self) -> None:
        if self._status == "disposed":
            raise RuntimeError(f'agent "{self.id}" is disposed')


def _collect_tools(host: Host) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}

    def register(tool: Tool) -> None:
        if tool.name in tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        tools[tool.name] = tool

    host.hook.dsh_register_tools(register=register)
    return tools
