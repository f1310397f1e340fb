"""What Enter does with the editor's text: run a command, send, steer, or prepare references first.

The flow is independent of prompt_toolkit: `Submitter` drives anything with a `text` attribute
and `add_history`, so it is tested with a plain object. Session mentions are parsed by the
mounted session-reference service. Without it no code of that feature runs: a message that
merely looks like it holds a reference is refused with "capability unavailable" (sending the
raw markup would hand the model a URI it cannot use), and every other message goes out as typed.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dsh_host.jstext import js_trim

log = logging.getLogger("dsh.tui")

CAPABILITY_UNAVAILABLE = "Session reference capability unavailable."


class Editor(Protocol):
    """The part of an editor the submission flow uses."""

    text: str

    def add_history(self, text: str) -> None: ...


@dataclass(frozen=True)
class MentionSyntax:
    """Parsing `@[label](dsh-session:...)` mentions, and rendering their errors as one line."""

    parse_text: Callable[[str], Any]
    describe_error: Callable[[BaseException], str]
    format_mention: Callable[..., str]


# The shape of a reference (a bare `dsh-session:` URI or an explicit mention's target), recognised
# without the feature's parser so a host without the service can refuse rather than mis-send.
REFERENCE_SHAPE = re.compile(r"dsh-session:[A-Za-z0-9_-]|\]\(dsh-session:")


def mention_syntax(service: Any) -> MentionSyntax | None:
    """The mention helpers a session-reference service exposes, or None without a service."""
    if service is None:
        return None
    return MentionSyntax(service.parse_text, service.describe_error, service.format_mention)


def agent_id(agent: Any) -> str:
    """The id of `agent`'s session (the id the user sees)."""
    session = getattr(agent, "session", None)
    return session.header.id if session is not None else agent.id


class Submitter:
    """Turns one submitted editor value into a command, a message, or a steering message.

    `submit()` handles everything it can synchronously; only a message with session mentions
    waits for `prepare()`, and while it waits further submissions are ignored (a second Enter
    must not send twice).
    """

    def __init__(
        self,
        editor: Editor,
        *,
        agent: Callable[[], Any],
        service: Callable[[], Any],
        run_command: Callable[[str], None],
        notify_error: Callable[[str], None],
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._editor = editor
        self._agent = agent
        self._service = service
        self._run_command = run_command
        self._notify_error = notify_error
        self._on_change = on_change
        self._pending: asyncio.Event | None = None
        self._disposed = False

    @property
    def preparing(self) -> bool:
        """True while a message waits for its references to be prepared (Enter is disabled)."""
        return self._pending is not None

    def submit(self, value: str) -> asyncio.Task[None] | None:
        """Handle one Enter on `value`; returns the preparation task when there is one."""
        if self._disposed or self.preparing:
            return None
        text = js_trim(value)
        if not text:
            return None
        self._editor.text = ""
        # A command is recognised on the raw value: "  /help" is an ordinary message.
        if value.startswith("/"):
            self._editor.add_history(text)
            self._run_command(text)
            return None
        service = self._service()
        mentions = mention_syntax(service)
        if mentions is None:
            if REFERENCE_SHAPE.search(text):
                self._restore(value)
                self._notify_error(CAPABILITY_UNAVAILABLE)
                return None
            self._editor.add_history(text)
            self._dispatch([_text_block(text)], [])
            return None
        try:
            parsed = mentions.parse_text(text)
        except Exception as exc:  # noqa: BLE001 - any parse failure refuses the message
            self._restore(value)
            self._notify_error(f"Invalid session reference: {mentions.describe_error(exc)}")
            return None
        if not parsed.references:
            self._editor.add_history(text)
            self._dispatch([_text_block(parsed.text)], [])
            return None
        self._pending = asyncio.Event()
        self._on_change()
        return asyncio.get_running_loop().create_task(
            self._prepare_and_dispatch(service, mentions, value, text, parsed, self._pending)
        )

    def dispose(self) -> None:
        """Stop: cancel a pending preparation; whatever it yields later is not sent."""
        self._disposed = True
        if self._pending is not None:
            self._pending.set()

    async def _prepare_and_dispatch(
        self, service: Any, mentions: MentionSyntax, value: str, text: str, parsed: Any, cancel: asyncio.Event
    ) -> None:
        try:
            prepared = await service.prepare(self._agent(), [_text_block(parsed.text)], parsed.references, cancel)
        except Exception as exc:  # noqa: BLE001 - every failure is reported the same way
            if not self._disposed and not cancel.is_set():
                self._restore(value)
                self._notify_error(f"Session reference failed: {mentions.describe_error(exc)}")
        else:
            if not self._disposed:
                self._editor.add_history(text)
                # Clear only our own text: a new draft typed while waiting stays.
                if self._editor.text == value:
                    self._editor.text = ""
                self._dispatch(prepared.content, prepared.contexts)
        finally:
            self._pending = None
            self._on_change()

    def _restore(self, value: str) -> None:
        # Never overwrite a draft the user started meanwhile.
        if not self._editor.text:
            self._editor.text = value

    def _dispatch(self, content: Sequence[Any], contexts: Sequence[Any]) -> None:
        # Send versus steer is decided now, after any preparation, not when Enter was pressed.
        agent = self._agent()
        status = agent.status
        if status == "disposed":
            self._notify_error(f'Agent "{agent_id(agent)}" is disposed.')
            return
        deliver = agent.steer if status == "running" else agent.send
        try:
            result = deliver(list(content), contexts=list(contexts))
        except Exception as exc:  # noqa: BLE001 - the agent refused the message; tell the user
            self._notify_error(f"Message not sent: {exc}")
            return
        if inspect.isawaitable(result):
            asyncio.ensure_future(result).add_done_callback(_log_failure)


def _text_block(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("message delivery failed", exc_info=future.exception())
