"""The chat application: a prompt_toolkit editor under a transcript printed into the scrollback.

The bottom of the terminal holds the live part (the streaming reply, the editor, the completion
menu, a status line); everything committed to the session log is printed above it once, with
rich, through `run_in_terminal`, so the terminal's own scrollback keeps the conversation.

Slash commands come from `dsh_register_slash_commands`: the host's own (`/help`, `/new`,
`/sessions`, `/resume ID`, `/quit`, from `dsh_host.builtins`) and the mounted plugins'. The
transcript's renderers and the `@` completion sources come from their hooks the same way. A handler
gets this `ChatUI` (`host`, `session`, `agent`, `notice()`, `error()`, `print()`) and the
argument text; a string it returns (or its awaitable resolves to) is shown as a notice, an
exception as an error line.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.application.current import set_app
from prompt_toolkit.buffer import Buffer, CompletionState
from prompt_toolkit.completion import Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings
from prompt_toolkit.key_binding.defaults import load_key_bindings
from prompt_toolkit.layout import (
    ConditionalContainer,
    Float,
    FloatContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.layout.menus import CompletionsMenu
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.styles import Style
from rich.console import Console, RenderableType

from dsh_host.asyncs import resolve
from dsh_host.terminal_text import display_inline_text, display_text
from dsh_host.text import js_trim
from dsh_host.tui import render
from dsh_host.tui.completion import MentionCompleter, first_choice
from dsh_host.tui.file_search import WorkspaceFileSearch
from dsh_host.tui.mentions import collect_sources
from dsh_host.tui.slash import SlashCommands, start_command
from dsh_host.tui.submit import Steered, Submitter
from dsh_host.tui.title import RESTORE_TITLE, SAVE_TITLE, window_title

if TYPE_CHECKING:
    from dsh_host.agent.agent import Agent
    from dsh_host.host import Host
    from dsh_host.jsontypes import Json
    from dsh_host.session.events import Event
    from dsh_host.session.session import Session

log = logging.getLogger("dsh.tui")

AgentFactory = Callable[["Host", "Session"], "Agent"]

_MENU_HEIGHT = 12
_PREVIEW_LINES = 12

STYLE = Style.from_dict(
    {
        "rule": "#606060",
        "prompt": "ansibrightblue bold",
        "status": "#808080",
        "status.running": "ansiyellow",
        "preview": "",
        "preview.reasoning": "#808080 italic",
        "steering.badge": "bg:ansiyellow #000000 bold",
        "steering": "ansiyellow",
        "completion-menu.completion": "bg:#303030 #d0d0d0",
        "completion-menu.completion.current": "bg:#005f87 #ffffff",
        "completion-menu.meta.completion": "bg:#262626 #8a8a8a",
        "completion-menu.meta.completion.current": "bg:#005f87 #d0d0d0",
    }
)


def default_agent_factory(host: Host, session: Session) -> Agent:
    """An agent on `session` with the configured model (`ModelUnavailable` when it cannot run)."""
    from dsh_host.agent.agent import Agent

    return Agent.create(host, session, host.models.resolve())


def model_label(agent: Agent) -> str:
    """How the banner names the agent's model."""
    if agent.provider == "scripted":
        return "scripted model (keyless)"
    return f"{agent.provider}:{agent.model}"


class TranscriptPrinter:
    """Prints renderables above the running application, in order, batched per redraw."""

    def __init__(self, console: Console, app: Application[None]) -> None:
        self.console = console
        self._app = app
        self._pending: list[RenderableType] = []
        self._scheduled = False

    def print(self, *renderables: RenderableType) -> None:
        self._pending.extend(renderables)
        if not self._app.is_running:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            with set_app(self._app):
                run_in_terminal(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        for renderable in pending:
            self.console.print(renderable)


class StreamPreview:
    """The reply being streamed, shown live under the transcript until its message commits."""

    def __init__(self) -> None:
        self._parts: list[tuple[str, str]] = []

    def add(self, chunk: Json) -> None:
        kind = chunk.get("type")
        if kind in ("text-delta", "reasoning-delta") and isinstance(chunk.get("text"), str):
            style = "class:preview" if kind == "text-delta" else "class:preview.reasoning"
            if self._parts and self._parts[-1][0] == style:
                self._parts[-1] = (style, self._parts[-1][1] + chunk["text"])
            else:
                self._parts.append((style, chunk["text"]))

    def clear(self) -> None:
        self._parts.clear()

    def __bool__(self) -> bool:
        return bool(self._parts)

    def fragments(self) -> StyleAndTextTuples:
        text_lines: list[tuple[str, str]] = []
        for style, text in self._parts:
            for index, line in enumerate(display_text(text).split("\n")):
                if index or not text_lines:
                    text_lines.append((style, line))
                else:
                    text_lines[-1] = (text_lines[-1][0], text_lines[-1][1] + line)
        shown = text_lines[-_PREVIEW_LINES:]
        out: StyleAndTextTuples = []
        for style, line in shown:
            out.append((style, f" {line}\n"))
        return out


class _BufferEditor:
    """The submission flow's view of the prompt_toolkit buffer."""

    def __init__(self, buffer: Buffer) -> None:
        self._buffer = buffer

    @property
    def text(self) -> str:
        return self._buffer.text

    @text.setter
    def text(self, value: str) -> None:
        self._buffer.document = Document(value, len(value))

    def add_history(self, text: str) -> None:
        self._buffer.history.append_string(text)


class ChatUI:
    """One chat in the terminal: an agent on a session, the editor, and the transcript.

    `agent_factory(host, session)` builds the agent for each session the chat opens (`/new`,
    `/resume`); the chat closes it (`agent.close()`: dispose, then flush its session) when it
    moves on or closes.
    """

    def __init__(
        self,
        host: Host,
        session: Session,
        *,
        agent_factory: AgentFactory = default_agent_factory,
        console: Console | None = None,
    ) -> None:
        self.host = host
        self._agent_factory = agent_factory
        # Running command handlers (cancelled on close) and reference preparations (signalled
        # through the submitter instead, so a late result is dropped rather than interrupted).
        self._commands_running: set[asyncio.Future[Any]] = set()
        self._preparations: set[asyncio.Future[Any]] = set()
        self._menu_refills: set[asyncio.Future[None]] = set()
        self._exit_armed = False
        # The text a Tab was pressed on before any row of its menu showed: its answer is chosen from.
        self._tab_waiting: Document | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self.preview = StreamPreview()
        self.commands = SlashCommands.collect(host)
        self.transcript = render.Transcript(host.hook)
        sources = collect_sources(host)
        self.mention_hints = [source.hint for source in sources if source.hint]
        self.session = session
        self.model_problem: str | None = None
        """Why no message can be sent (the configured model cannot run), or None."""
        self.agent = self._new_agent(session)
        self.completer = MentionCompleter(
            _file_search(session),
            commands=self.commands.names_and_help,
            sources=sources,
            target=lambda: self.agent,
            on_abandoned=self._complete_again,
            on_pending=self._refresh_menu,
            on_answered=self._answered,
        )
        self.buffer = Buffer(
            multiline=True,
            completer=self.completer,
            complete_while_typing=True,
            history=InMemoryHistory(),
            on_text_changed=self._on_text_changed,
        )
        self.app: Application[None] = Application(
            layout=self._layout(),
            key_bindings=merge_key_bindings([load_key_bindings(), self._key_bindings()]),
            style=STYLE,
            full_screen=False,
            erase_when_done=True,
        )
        self.app.ttimeoutlen = 0.05  # Escape cancels a turn; do not make it wait for a sequence.
        self.printer = TranscriptPrinter(console or Console(highlight=False), self.app)
        # Messages that went in as steering and that no step has written yet (the live badge).
        self.steering: list[Steered] = []
        self.submitter = Submitter(
            _BufferEditor(self.buffer),
            agent=lambda: self.agent,
            run_command=self.run_command,
            notify_error=self.error,
            on_change=self.app.invalidate,
            on_steered=self._steered,
            refusal=lambda: self.model_problem,
        )
        self._watch()

    # --- what plugins' command handlers use -------------------------------------------------------

    def print(self, *renderables: RenderableType) -> None:
        """Print rich renderables into the transcript (escape untrusted text first)."""
        self.printer.print(*renderables)

    def notice(self, text: str) -> None:
        """Print an informational line (escaped here)."""
        self.print(render.notice(text))

    def error(self, text: str) -> None:
        """Print an error line (escaped here)."""
        self.print(render.error(text))

    # --- running ----------------------------------------------------------------------------------

    async def run(self, *, replay: bool = False) -> None:
        """Print the banner (and the session so far when `replay`), then chat until exit."""
        self.print(self._banner())
        if replay:
            self._replay()
        self._say_model_problem()
        self.app.output.write_raw(SAVE_TITLE)
        self._show_title()
        try:
            await self.app.run_async()
        finally:
            await self.close()
            # Where the terminal keeps no title stack, an empty title beats a stale one.
            self.app.output.set_title("")
            self.app.output.write_raw(RESTORE_TITLE)
            self.app.output.flush()

    async def close(self) -> None:
        """Stop preparations and completions, dispose the agent, persist the session."""
        self.submitter.dispose()
        self.completer.supersede()
        self.completer.files.dispose()
        await self._leave_session()
        for task in [*self._commands_running, *self._menu_refills]:
            task.cancel()

    def exit(self) -> None:
        """Leave the chat (the `/quit` command)."""
        if self.app.is_running and not self.app.is_done:
            self.app.exit()

    # --- commands ---------------------------------------------------------------------------------

    def run_command(self, text: str) -> None:
        """Run `/name argument`; an unknown name or a failing handler is reported, not raised."""
        pending = start_command(self, self.commands, text)
        if pending is not None:
            _keep(self._commands_running, asyncio.ensure_future(pending))

    # --- sessions ---------------------------------------------------------------------------------

    async def switch_to(self, session: Session, *, replay: bool) -> None:
        """Make `session` the chat's session, with a new agent; print it when `replay`."""
        await self._leave_session()
        if session.cwd != self.session.cwd:
            self.completer.files.dispose()
            self.completer.files = _file_search(session)
        self.session = session
        self.agent = self._new_agent(session)
        self._watch()
        self._show_title()
        self.print(self._banner())
        if replay:
            self._replay()
        self._say_model_problem()

    def _say_model_problem(self) -> None:
        if self.model_problem is not None:
            self.error(f"{self.model_problem}; messages are not sent until then")

    def _new_agent(self, session: Session) -> Agent:
        """The factory's agent on `session`; for a model that cannot run, one that never sends.

        The chat still opens (to read the session, run commands, resume another), and says why
        nothing can be sent; no stand-in model answers in the configured one's place.
        """
        from dsh_host.agent.agent import Agent
        from dsh_host.models.registry import ModelUnavailable

        try:
            agent = self._agent_factory(self.host, session)
        except ModelUnavailable as exc:
            self.model_problem = str(exc)
            return Agent.create(self.host, session, exc.placeholder)
        self.model_problem = None
        return agent

    def _show_title(self) -> None:
        self.app.output.set_title(window_title(self.session.id, self.session.events))

    def _watch(self) -> None:
        self._unsubscribe = [
            self.session.subscribe(self._on_event),
            self.agent.on_status(lambda _: self.app.invalidate()),
        ]

    async def _leave_session(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self.preview.clear()
        self.steering.clear()
        await resolve(self.agent.close())

    def _replay(self) -> None:
        self.print(*(r for event in self.session.events for r in self.transcript.render(event)))

    def _banner(self) -> RenderableType:
        features = [plugin.name for plugin in self.host.mounted]
        # Sessions are mentioned through the session-reference feature; without it `@` completes files only.
        mentionable = self.host.services.get("session_references") is not None
        return render.banner(
            model_label(self.agent), self.session.id, features, self.session.cwd, sessions_mentionable=mentionable
        )

    # --- events -----------------------------------------------------------------------------------

    def _on_event(self, session: Session, event: Event) -> None:
        if event.type == "assistant/chunk":
            self.preview.add(event.data.get("chunk", {}))
        else:
            if event.type in ("assistant/message", "turn/end"):
                self.preview.clear()
            elif event.type == "session/title":
                self._show_title()
            elif event.type in ("steering/message", "user/message"):
                self._steering_logged(event)
            renderables = self.transcript.render(event)
            if renderables:
                self.print(*renderables)
        self.app.invalidate()

    def _steered(self, steered: Steered) -> None:
        self.steering.append(steered)
        add_done_callback = getattr(steered.ticket, "add_done_callback", None)
        if add_done_callback is not None:
            add_done_callback(lambda result: self._steering_settled(steered, result))
        self.app.invalidate()

    def _steering_settled(self, steered: Steered, result: object) -> None:
        if steered in self.steering:
            self.steering.remove(steered)
            if getattr(result, "reason", None) == "dropped":
                self.notice("Steering dropped: " + render.join_display_text(steered.content))
            self.app.invalidate()

    def _steering_logged(self, event: Event) -> None:
        # The loop writes steering in arrival order, as steering or (left over) as a new prompt.
        source = event.data.get("source")
        if self.steering and isinstance(source, Mapping) and source.get("kind") == "user":
            self.steering.pop(0)

    def _steering_lines(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        for steered in self.steering:
            text = display_inline_text(js_trim(render.join_display_text(steered.content)))
            out += [("class:steering.badge", " Steering "), ("class:steering", f" {text}\n")]
        return out

    def _on_text_changed(self, _: Buffer) -> None:
        self._exit_armed = False
        self._tab_waiting = None
        self.completer.supersede()

    def _choose_row(self) -> None:
        """Tab: insert the menu's selected row, else its first choice (`first_choice`); with no row
        shown yet, the first choice of the answer for this text.

        While a request runs, prompt_toolkit holds an empty menu (the screen may still show the
        previous text's rows) and drops any other request, so a Tab that only asked would be lost.
        """
        state = self.buffer.complete_state
        if state is not None and state.completions:
            self._apply(state.current_completion or first_choice(state.original_document, state.completions))
            return
        self._tab_waiting = self.buffer.document
        self.buffer.start_completion()  # dropped when one runs already: that one answers this text

    def _answered(self, document: Document) -> None:
        """The menu of `document` is made: choose its first choice if a Tab waits for it."""
        if self._tab_waiting is None or document != self._tab_waiting or self.buffer.document != document:
            return
        self._tab_waiting = None
        state = self.buffer.complete_state
        if state is not None:
            self._apply(first_choice(document, state.completions))

    def _apply(self, completion: Completion | None) -> None:
        if completion is not None:
            self.buffer.apply_completion(completion)

    def _complete_again(self) -> None:
        if self.app.is_running and self.buffer.complete_state is None:
            self.buffer.start_completion()

    def _refresh_menu(self) -> None:
        """Ask the completer again about the text whose menu said more is coming."""
        if self.app.is_running:
            _keep(self._menu_refills, asyncio.ensure_future(self._refill_menu(self.buffer.complete_state)))

    async def _refill_menu(self, state: CompletionState | None) -> None:
        answer = await self.completer.ask_again()
        if answer is None:
            return
        document, completions = answer
        buffer = self.buffer
        if buffer.document != document or buffer.complete_state is not state:
            return  # typed, chosen or closed meanwhile: that request owns the menu now
        if state is not None and state.complete_index is not None:
            return  # the user is choosing an item: keep the list still under the cursor
        # Swapped in place rather than by a new completion request, which would blank the menu first.
        buffer.complete_state = CompletionState(document, completions) if completions else None
        self.app.invalidate()

    # --- keys -------------------------------------------------------------------------------------

    def _key_bindings(self) -> KeyBindings:
        bindings = KeyBindings()
        running = Condition(lambda: self.agent.status == "running")

        @bindings.add("enter")
        def _submit(event: KeyPressEvent) -> None:
            state = self.buffer.complete_state
            if state is not None and state.current_completion is not None:
                self.buffer.apply_completion(state.current_completion)
                return
            task = self.submitter.submit(self.buffer.text)
            if task is not None:
                _keep(self._preparations, task)

        @bindings.add("escape", "enter")
        @bindings.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            self.buffer.insert_text("\n")

        @bindings.add("tab")
        def _complete(event: KeyPressEvent) -> None:
            self._choose_row()

        @bindings.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            self.interrupt()

        @bindings.add("escape", filter=running)
        def _cancel(event: KeyPressEvent) -> None:
            self.agent.cancel()

        @bindings.add("escape", filter=~running)
        def _close_menu(event: KeyPressEvent) -> None:
            self.buffer.cancel_completion()
            self._tab_waiting = None
            self.completer.supersede()  # closed on purpose: a pending answer must not reopen it

        @bindings.add("c-d", filter=Condition(lambda: not self.buffer.text))
        def _quit(event: KeyPressEvent) -> None:
            self.exit()

        return bindings

    def interrupt(self) -> None:
        """Ctrl+C: abandon a pending composition (its text comes back), else cancel a running
        turn, else clear the editor, else (pressed twice) exit."""
        if self.submitter.abort():
            self.completer.supersede()
        elif self.agent.status == "running":
            self.agent.cancel()
        elif self.buffer.text:
            self.buffer.reset()
            self.completer.supersede()  # reset() changes the text without a change event
        elif self._exit_armed:
            self.exit()
            return
        else:
            self.notice("Press Ctrl+C again to exit.")
            self._exit_armed = True
            return
        self._exit_armed = False

    # --- layout -----------------------------------------------------------------------------------

    def _layout(self) -> Layout:
        menu_open = Condition(lambda: bool(self.buffer.complete_state and self.buffer.complete_state.completions))
        editor = Window(
            BufferControl(self.buffer, input_processors=[BeforeInput("› ", style="class:prompt")]),
            height=Dimension(min=1, max=10),
            wrap_lines=True,
            dont_extend_height=True,
        )
        body = HSplit(
            [
                ConditionalContainer(
                    Window(FormattedTextControl(self.preview.fragments), wrap_lines=True, dont_extend_height=True),
                    filter=Condition(lambda: bool(self.preview)),
                ),
                ConditionalContainer(
                    Window(FormattedTextControl(self._steering_lines), dont_extend_height=True),
                    filter=Condition(lambda: bool(self.steering)),
                ),
                Window(height=1, char="─", style="class:rule"),
                editor,
                Window(height=1, char="─", style="class:rule"),
                Window(FormattedTextControl(self._status_line), height=1),
                # Room below the editor so the completion menu is not clipped at the bottom.
                ConditionalContainer(Window(height=Dimension.exact(_MENU_HEIGHT)), filter=menu_open),
            ]
        )
        menu = Float(xcursor=True, ycursor=True, content=CompletionsMenu(max_height=_MENU_HEIGHT, scroll_offset=1))
        return Layout(FloatContainer(body, floats=[menu]), focused_element=editor)

    def _status_line(self) -> StyleAndTextTuples:
        status = self.agent.status
        if self.submitter.preparing:
            state = ("class:status.running", "preparing message… · Ctrl+C to cancel ")
        elif status == "running":
            state = ("class:status.running", "running · Esc to cancel ")
        else:
            state = ("class:status", f"{status} ")
        details = "  ".join(
            [
                display_inline_text(model_label(self.agent)),
                display_inline_text(self.session.cwd or "(no cwd)"),
                f"session {display_inline_text(self.session.id)}",
            ]
        )
        return [state, ("class:status", f" {details}")]


def _file_search(session: Session) -> WorkspaceFileSearch:
    return WorkspaceFileSearch(session.cwd or os.getcwd())


def _keep(tasks: set[asyncio.Future[Any]], task: asyncio.Future[Any]) -> None:
    # The loop holds tasks weakly; keep each one until it is done.
    tasks.add(task)
    task.add_done_callback(tasks.discard)


# --- entry points ---------------------------------------------------------------------------------


async def open_session(host: Host, *, session_id: str | None = None, continue_last: bool = False) -> Session:
    """The session a chat opens: the given one, the newest in this directory, or a new one."""
    if session_id is not None:
        return await host.sessions.resume(session_id)
    cwd = os.getcwd()
    if continue_last:
        records = await host.services.session_query.list_sessions()
        newest = next((r for r in records if r.cwd == cwd), None)
        if newest is not None:
            return await host.sessions.resume(newest.id)
    return host.sessions.create(cwd)


async def chat(
    host: Host,
    *,
    session_id: str | None = None,
    continue_last: bool = False,
    agent_factory: AgentFactory = default_agent_factory,
    console: Console | None = None,
) -> None:
    """Chat in the terminal until the user leaves; the session is flushed on the way out."""
    session = await open_session(host, session_id=session_id, continue_last=continue_last)
    ui = ChatUI(host, session, agent_factory=agent_factory, console=console)
    await ui.run(replay=bool(session.events))


def run_chat(host: Host, session_id: str | None = None, continue_last: bool = False) -> None:
    """`dsh chat`: run the chat on a fresh event loop (`session_id` and `continue_last` as in `chat`)."""
    asyncio.run(chat(host, session_id=session_id, continue_last=continue_last))
