"""What Enter does with the editor's text: run a command, or compose it and send or steer it.

The flow is independent of prompt_toolkit: `Submitter` drives anything with a `text` attribute
and `add_history`, so it is tested with a plain object. Composing is the agent's
(`await agent.compose(text, signal=...)`): plugins turn their mentions into contexts through
the `dsh_compose_message` hook (session-reference does), and without them the text goes out
as typed. While a composition is pending further submissions are ignored (a second Enter must
not send twice); Ctrl+C abandons it (`abort`) and puts the text back.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dsh_host.errors import DshError
from dsh_host.text import js_trim

if TYPE_CHECKING:
    from dsh_host.agent.agent import Agent
    from dsh_host.agent.composition import Composition
    from dsh_host.agent.tickets import Ticket
    from dsh_host.hookspecs import Json

log = logging.getLogger("dsh.tui")


class Editor(Protocol):
    """The part of an editor the submission flow uses."""

    text: str

    def add_history(self, text: str) -> None: ...


@dataclass(frozen=True, eq=False)
class Steered:
    """A message that went in as steering of a running turn (what the UI's badge shows)."""

    content: list[Json]
    ticket: Ticket
    """What `agent.steer` returned: a `Ticket`, resolved when its turn ends or it is dropped."""


@dataclass(frozen=True)
class _Pending:
    value: str
    signal: asyncio.Event


def agent_id(agent: Agent) -> str:
    """The id of `agent`'s session (the id the user sees)."""
    session = getattr(agent, "session", None)
    return session.header.id if session is not None else agent.id


class Submitter:
    """Turns one submitted editor value into a command, a message, or a steering message.

    `submit()` runs a command at once; a message is composed first, and sent (or, when a turn
    is running once composing is done, steered: `on_steered` is told) when that succeeds.
    While `refusal()` gives a reason, no message is composed or sent: the reason is shown.
    """

    def __init__(
        self,
        editor: Editor,
        *,
        agent: Callable[[], Agent],
        run_command: Callable[[str], None],
        notify_error: Callable[[str], None],
        on_change: Callable[[], None] = lambda: None,
        on_steered: Callable[[Steered], None] = lambda steered: None,
        refusal: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._editor = editor
        self._agent = agent
        self._run_command = run_command
        self._notify_error = notify_error
        self._on_change = on_change
        self._on_steered = on_steered
        self._refusal = refusal
        self._pending: _Pending | None = None
        self._disposed = False

    @property
    def preparing(self) -> bool:
        """True while a message waits for its composition (Enter is disabled)."""
        return self._pending is not None

    def submit(self, value: str) -> asyncio.Task[None] | None:
        """Handle one Enter on `value`; returns the composing task when there is one."""
        if self._disposed or self.preparing:
            return None
        text = js_trim(value)
        if not text:
            return None
        # A command is recognised on the raw value: "  /help" is an ordinary message.
        if value.startswith("/"):
            self._editor.text = ""
            self._editor.add_history(text)
            self._run_command(text)
            return None
        refused = self._refusal()
        if refused is not None:
            # Nothing is sent and the text stays in the editor, to send once it can be.
            self._notify_error(f"Message not sent: {refused}")
            return None
        self._editor.text = ""
        agent = self._agent()
        if agent.status == "disposed":
            self._notify_error(f'Agent "{agent_id(agent)}" is disposed.')
            return None
        pending = self._pending = _Pending(value, asyncio.Event())
        self._on_change()
        return asyncio.get_running_loop().create_task(self._compose_and_dispatch(agent, text, pending))

    def abort(self) -> bool:
        """Abandon the pending composition and put its text back; False when there is none."""
        pending = self._pending
        if pending is None:
            return False
        pending.signal.set()
        self._pending = None
        self._restore(pending.value)
        self._on_change()
        return True

    def dispose(self) -> None:
        """Stop: abandon a pending composition; whatever it yields later is not sent."""
        self._disposed = True
        if self._pending is not None:
            self._pending.signal.set()

    async def _compose_and_dispatch(self, agent: Agent, text: str, pending: _Pending) -> None:
        try:
            composition = await agent.compose(text, signal=pending.signal)
        except Exception as exc:  # noqa: BLE001 - every failure is reported the same way
            if not self._disposed and not pending.signal.is_set():
                self._restore(pending.value)
                # A DshError's message is the line to show; anything else is a bug worth naming.
                self._notify_error(str(exc) if isinstance(exc, DshError) else f"Message not sent: {exc!r}")
        else:
            if not self._disposed and not pending.signal.is_set():
                self._editor.add_history(text)
                # Clear only our own text: a new draft typed while waiting stays.
                if self._editor.text == pending.value:
                    self._editor.text = ""
                self._dispatch(composition)
        finally:
            if self._pending is pending:
                self._pending = None
                self._on_change()

    def _restore(self, value: str) -> None:
        # Never overwrite a draft the user started meanwhile.
        if not self._editor.text:
            self._editor.text = value

    def _dispatch(self, composition: Composition) -> None:
        # Send versus steer is decided now, after composing, not when Enter was pressed.
        agent = self._agent()
        status = agent.status
        if status == "disposed":
            self._notify_error(f'Agent "{agent_id(agent)}" is disposed.')
            return
        steering = status == "running"
        deliver = agent.steer if steering else agent.send
        content = list(composition.content)
        try:
            result = deliver(content, contexts=list(composition.contexts))
        except Exception as exc:  # noqa: BLE001 - the agent refused the message; tell the user
            self._notify_error(f"Message not sent: {exc}")
            return
        if inspect.isawaitable(result):
            asyncio.ensure_future(result).add_done_callback(_log_failure)
        elif steering and getattr(result, "steering", True):
            self._on_steered(Steered(content, result))


def _log_failure(future: asyncio.Future[object]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("message delivery failed", exc_info=future.exception())
