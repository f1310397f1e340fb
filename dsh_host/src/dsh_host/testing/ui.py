"""`RecordingUI`: run a plugin's slash commands in a test, exactly as the chat runs them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host.tui.slash import SlashCommands, start_command

if TYPE_CHECKING:
    from rich.console import RenderableType

    from dsh_host import Agent, Host, Session


class RecordingUI:
    """A `dsh_host.ui.SlashCommandUI` for tests: it records what commands show instead of drawing.

    Built on an agent (the chat's current one); its commands are those the agent's host and its
    plugins register, run through the same path as the terminal UI's::

        ui = RecordingUI(agent)
        await ui.run("/compact 2000")
        assert ui.errors == [] and ui.notices == ["..."]
    """

    def __init__(self, agent: Agent) -> None:
        self._agent = agent
        self.commands = SlashCommands.collect(agent.host)
        self.notices: list[str] = []
        """Every notice shown, in order (a handler's returned string is one)."""
        self.errors: list[str] = []
        """Every error line shown, in order (`/<name> failed: ...` for a handler that raised)."""
        self.printed: list[RenderableType] = []
        """Every renderable printed into the transcript, in order."""
        self.exited = False
        """Whether a command asked to leave the chat."""

    @property
    def host(self) -> Host:
        return self._agent.host

    @property
    def agent(self) -> Agent:
        return self._agent

    @property
    def session(self) -> Session:
        return self._agent.session

    def print(self, *renderables: RenderableType) -> None:
        self.printed.extend(renderables)

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def error(self, text: str) -> None:
        self.errors.append(text)

    def exit(self) -> None:
        self.exited = True

    async def run(self, text: str) -> None:
        """Run the command line `text` (`/name argument`) to its end, as if typed in the chat."""
        pending = start_command(self, self.commands, text)
        if pending is not None:
            await pending
