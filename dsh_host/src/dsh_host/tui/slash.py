"""Slash commands: the registry of one chat, the `ui` a handler gets, and running a command.

Plugins register commands through `dsh_register_slash_commands`; the chat and the testing
helper (`dsh_host.testing.RecordingUI`) both run them through `start_command`, so a command
behaves the same under test as in the terminal. Nothing here needs prompt_toolkit.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dsh_host.asyncs import resolve
from dsh_host.text import JS_WHITESPACE, js_trim

if TYPE_CHECKING:
    from rich.console import RenderableType

    from dsh_host.agent.agent import Agent
    from dsh_host.host import Host
    from dsh_host.session.session import Session

log = logging.getLogger("dsh.tui")

_COMMAND = re.compile(rf"/([^{re.escape(JS_WHITESPACE)}]*)(.*)\Z", re.DOTALL)


class SlashCommandUI(Protocol):
    """The chat a slash command was typed in: what its handler may use of `ui`.

    The terminal UI is one; `dsh_host.testing.RecordingUI` is another, for tests.
    """

    @property
    def host(self) -> Host:
        """The host the chat runs on (its services, store and hooks)."""
        ...

    @property
    def agent(self) -> Agent:
        """The chat's current agent (it changes when the chat switches sessions)."""
        ...

    @property
    def session(self) -> Session:
        """The chat's current session."""
        ...

    def print(self, *renderables: RenderableType) -> None:
        """Print rich renderables into the transcript (build them with `dsh_host.ui`)."""
        ...

    def notice(self, text: str) -> None:
        """Show an informational line (escaped for the terminal by the UI)."""
        ...

    def error(self, text: str) -> None:
        """Show an error line (escaped for the terminal by the UI)."""
        ...

    def exit(self) -> None:
        """Leave the chat once the current command returns."""
        ...


SlashCommandHandler = Callable[[SlashCommandUI, str], "str | Awaitable[str | None] | None"]
"""`handler(ui, argument)`: runs `/name argument`; a string it returns (or resolves to) is shown
to the user as a notice, an exception as the error line `/<name> failed: <message>`."""


@dataclass(frozen=True)
class SlashCommand:
    """A registered `/name` command with its `/help` line."""

    name: str
    help: str
    handler: SlashCommandHandler


class SlashCommands:
    """The commands of one chat, in registration order."""

    def __init__(self) -> None:
        self._commands: dict[str, SlashCommand] = {}

    @classmethod
    def collect(cls, host: Host) -> SlashCommands:
        """Every command the host and its plugins register through `dsh_register_slash_commands`."""
        commands = cls()
        host.hook.dsh_register_slash_commands(register=commands.register)
        return commands

    def register(self, name: str, help: str, handler: SlashCommandHandler) -> None:
        """Add `/name`; a name registered twice is an error (two plugins would fight over it)."""
        if name in self._commands:
            raise ValueError(f"slash command /{name} is already registered")
        self._commands[name] = SlashCommand(name, help, handler)

    def get(self, name: str) -> SlashCommand | None:
        """The command called `name`, or None."""
        return self._commands.get(name)

    def __iter__(self) -> Iterator[SlashCommand]:
        return iter(list(self._commands.values()))

    def names_and_help(self) -> list[tuple[str, str]]:
        """`(name, help)` of every command, for the editor's `/` completion."""
        return [(c.name, c.help) for c in self]


def start_command(ui: SlashCommandUI, commands: SlashCommands, text: str) -> Awaitable[None] | None:
    """Run the command line `text` (`/name argument`) on `ui`.

    An unknown name and a failing handler are reported on `ui`, never raised. A handler that
    returns an awaitable has only started: the awaitable returned here finishes it (and reports
    its result); the chat runs it in the background, a test awaits it.
    """
    match = _COMMAND.match(text)
    name, argument = (match.group(1), js_trim(match.group(2))) if match else ("", "")
    command = commands.get(name)
    if command is None:
        ui.error(f"Unknown command /{name}. Type /help for the list.")
        return None
    try:
        result = command.handler(ui, argument)
    except Exception as exc:  # noqa: BLE001 - a broken command must not end the chat
        _failed(ui, name, exc)
        return None
    if inspect.isawaitable(result):
        return _finish(ui, name, result)
    _show(ui, result)
    return None


async def _finish(ui: SlashCommandUI, name: str, result: Awaitable[object]) -> None:
    try:
        _show(ui, await resolve(result))
    except Exception as exc:  # noqa: BLE001 - see start_command
        _failed(ui, name, exc)


def _show(ui: SlashCommandUI, result: object) -> None:
    if isinstance(result, str):
        ui.notice(result)


def _failed(ui: SlashCommandUI, name: str, exc: BaseException) -> None:
    log.debug("/%s failed", name, exc_info=exc)
    ui.error(f"/{name} failed: {exc}")
