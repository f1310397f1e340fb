"""The real prompt_toolkit chat application, typed into through a pipe.

Keys go in through `create_pipe_input()`; the screen goes to `DummyOutput` (or a VT100 writer
over a string when a test inspects the bytes). The transcript console writes to a string.
Waits poll for a condition under a deadline; nothing depends on how long anything takes.
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.application.current import set_app
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.key_binding import KeyPress
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import DummyOutput, Output
from prompt_toolkit.output.vt100 import Vt100_Output
from rich.console import Console

from dsh_host import ComposeError, Composition, hookimpl
from dsh_host.asyncs import resolve
from dsh_host.host import Host
from dsh_host.testing import HostFactory
from dsh_host.tui.app import ChatUI, default_agent_factory, open_session
from dsh_host.tui.render import join_display_text
from dsh_host.ui import MentionCompletion
from dsh_session_reference import format_mention
from dsh_session_reference.terminal import SessionCompletions

ENTER, TAB, CTRL_C, ESCAPE = "\r", "\t", "\x03", "\x1b"
PROBE = "\x1b]2;title\x07\t\x7f\x9b31m"
ESCAPED = r"\x1b]2;title\x07\x09\x7f\x9b31m"
OWN_TITLE = re.compile("\x1b]2;(?:dsh · )?[^\x00-\x1f\x7f-\x9f]*\x07")


async def until(predicate: Callable[[], Any], what: str = "condition") -> None:
    """Let the loop run until `predicate()` holds (failing after a generous deadline)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


class FakeTicket:
    """What `steer` returns: the test resolves it (`dropped`, or a turn's end)."""

    steering = True

    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any], None]] = []

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self.callbacks.append(callback)

    def finish(self, reason: str) -> None:
        for callback in self.callbacks:
            callback(SimpleNamespace(reason=reason))


class FakeAgent:
    """Composes through the host's hook as the real agent does; records what the UI delivers.

    The test sets `status`.
    """

    provider = model = "scripted"

    def __init__(self, host: Host, session: Any) -> None:
        self.host = host
        self.session = session
        self.status = "idle"
        self.sent: list[tuple[list[Any], list[Any]]] = []
        self.steered: list[tuple[list[Any], list[Any]]] = []
        self.tickets: list[FakeTicket] = []
        self.cancels = 0

    @property
    def id(self) -> str:
        return self.session.id

    async def compose(self, text, *, signal=None):
        hook = self.host.hook.dsh_compose_message
        return await resolve(hook(agent=self, text=text, signal=signal or asyncio.Event()))

    def send(self, content, *, source=None, contexts=()):
        self.sent.append((content, list(contexts)))

    def steer(self, content, *, source=None, contexts=()):
        self.steered.append((content, list(contexts)))
        ticket = FakeTicket()
        self.tickets.append(ticket)
        return ticket

    def cancel(self, cause=None):
        self.cancels += 1

    def on_status(self, listener):
        return lambda: None

    async def dispose(self):
        self.status = "disposed"

    async def close(self):
        await self.dispose()
        await self.host.sessions.flush(self.session)


@dataclass
class Chat:
    ui: ChatUI
    keys: PipeInput
    console: Console
    task: asyncio.Task[None]

    @property
    def agent(self) -> Any:
        return self.ui.agent

    @property
    def transcript(self) -> str:
        return self.console.file.getvalue()

    def type(self, text: str) -> None:
        self.keys.send_text(text)

    async def type_until(self, text: str, predicate: Callable[[], Any], what: str = "condition") -> None:
        self.type(text)
        await until(predicate, what)

    def completions(self) -> list[tuple[str, str]]:
        state = self.ui.buffer.complete_state
        return [(c.display_text, c.display_meta_text) for c in state.completions] if state else []

    async def wait_for_completion(self, label: str) -> None:
        await until(lambda: any(shown == label for shown, _ in self.completions()), f"completion {label!r}")

    async def wait_for_output(self, text: str) -> None:
        await until(lambda: text in self.transcript, f"{text!r} in the transcript")

    async def clear(self) -> None:
        await self.type_until(CTRL_C, lambda: self.ui.buffer.text == "", "an empty editor")


@asynccontextmanager
async def open_chat(
    host: Host, session: Any, *, agent_factory: Any = None, output: Output | None = None
) -> AsyncIterator[Chat]:
    console = Console(file=io.StringIO(), width=200, color_system=None, highlight=False)
    factory = agent_factory or FakeAgent
    with create_pipe_input() as keys, create_app_session(input=keys, output=output or DummyOutput()):
        ui = ChatUI(host, session, agent_factory=factory, console=console)
        task = asyncio.create_task(ui.run(replay=bool(session.events)))
        await until(lambda: ui.app.is_running, "the application")
        chat = Chat(ui, keys, console, task)
        try:
            yield chat
        finally:
            ui.exit()
            await task


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "workspace"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "source-file.ts").write_text("x")
    (root / "docs" / "design notes.md").write_text("x")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def ref_host(make_host: HostFactory, workspace: Path) -> Host:
    return make_host(["session-reference"])


@pytest.fixture
def bare_host(make_host: HostFactory, workspace: Path) -> Host:
    return make_host()


def add_session(host: Host, session_id: str, cwd: str | None, created_at: int, *, title: str | None = None) -> Any:
    session = host.sessions.create(cwd, session_id, created_at=created_at)
    if title is not None:
        session.append("session/title", {"title": title, "messageSeqs": [], "source": "test"})
    return session


def user_text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}}


def reference_ids(contexts: list[Any]) -> list[str]:
    [context] = contexts
    assert context["source"] == {"kind": "plugin", "plugin": "session-reference"}
    assert context["meta"]["kind"] == "session-reference"
    return [ref["sessionId"] for ref in context["meta"]["references"]]


# --- files and sessions in one menu; send, then steer -------------------------------------------------


async def test_session_autocomplete_with_files_then_send_and_steer(ref_host, workspace):
    source = add_session(ref_host, "source-session", str(workspace), 1, title="Source chat")
    source.append("user/message", user_text("source background"), surface_op="append")
    add_session(ref_host, "no-cwd", None, 2)
    target = ref_host.sessions.create(str(workspace), "main-session", created_at=3)
    async with open_chat(ref_host, target) as chat:
        chat.type("@no-cwd")
        await chat.wait_for_completion("Session · no-cwd")
        assert ("Session · no-cwd", "(no cwd) · 1970-01-01T00:00:00.002Z") in chat.completions()
        await chat.clear()

        chat.type("@source-session")
        await chat.wait_for_completion("Session · Source chat")
        assert (
            "Session · Source chat",
            f"source-session · {workspace} · 1970-01-01T00:00:00.001Z",
        ) in chat.completions()
        await chat.type_until(TAB, lambda: chat.ui.buffer.text.startswith("@[Source chat]("))
        await chat.type_until(ENTER, lambda: chat.agent.sent, "a send")
        [(content, contexts)] = chat.agent.sent
        assert content == [{"type": "text", "text": "@Source chat"}]
        assert reference_ids(contexts) == ["source-session"]
        assert chat.ui.buffer.text == ""

        chat.agent.status = "running"
        chat.type(f"steer {format_mention('source-session', 'Source chat')}")
        await chat.type_until(ENTER, lambda: chat.agent.steered, "a steer")
        [(content, contexts)] = chat.agent.steered
        assert content == [{"type": "text", "text": "steer @Source chat"}]
        assert reference_ids(contexts) == ["source-session"]
        assert len(chat.agent.sent) == 1


async def test_a_file_mention_is_sent_as_text_without_contexts(ref_host, workspace):
    target = ref_host.sessions.create(str(workspace), "main-session")
    async with open_chat(ref_host, target) as chat:
        chat.type("@sfts")
        await chat.wait_for_completion("File · source-file.ts")
        await chat.type_until(TAB, lambda: chat.ui.buffer.text == "@src/source-file.ts ")
        await chat.type_until(ENTER, lambda: chat.agent.sent)
        assert chat.agent.sent == [([{"type": "text", "text": "@src/source-file.ts"}], [])]


async def test_a_folder_completion_descends_into_the_folder(ref_host, workspace):
    target = ref_host.sessions.create(str(workspace), "main-session")
    async with open_chat(ref_host, target) as chat:
        chat.type("@do")
        await chat.wait_for_completion("Folder · docs/")
        await chat.type_until(TAB, lambda: chat.ui.buffer.text == "@docs/")
        await chat.wait_for_completion("File · design notes.md")
        await chat.type_until(TAB, lambda: chat.ui.buffer.text == '@"docs/design notes.md" ')
        await chat.type_until(ENTER, lambda: chat.agent.sent)
        assert chat.agent.sent == [([{"type": "text", "text": '@"docs/design notes.md"'}], [])]


# --- hostile ids and cwds stay inert; the URI keeps the raw id ----------------------------------------


async def test_control_characters_in_candidates_are_escaped_on_screen_and_in_the_message(ref_host, workspace):
    evil_id = "evil\x1b\x07\x9b\ns"
    add_session(ref_host, evil_id, "/x/\x1b\x07\x9b\nf", 0)
    target = ref_host.sessions.create(str(workspace), "main-session", created_at=5)
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=40, columns=160), term="xterm", enable_cpr=False)
    async with open_chat(ref_host, target, output=output) as chat:
        chat.type("@evil")
        await chat.wait_for_completion(r"Session · evil\x1b\x07\x9b\x0as")
        assert (r"Session · evil\x1b\x07\x9b\x0as", r"/x/\x1b\x07\x9b\x0af · 1970-01-01T00:00:00.000Z") in (
            chat.completions()
        )
        await until(lambda: r"evil\x1b\x07\x9b\x0as" in screen.getvalue(), "the menu on screen")
        await chat.type_until(TAB, lambda: chat.ui.buffer.text.startswith("@["))
        await chat.type_until(ENTER, lambda: chat.agent.sent)
        [(content, contexts)] = chat.agent.sent
        assert content == [{"type": "text", "text": r"@evil\x1b\x07\x9b\x0as"}]
        assert reference_ids(contexts) == [evil_id]
    # The terminal gets its own SGR sequences and the chat's own window title (an OSC of inert
    # text), never the candidate's BEL, CSI or OSC.
    drawn = OWN_TITLE.sub("", screen.getvalue())
    assert "\x07" not in drawn and "\x9b" not in drawn and "\x1b]" not in drawn


# --- fallbacks ----------------------------------------------------------------------------------------


class ScriptedCandidates:
    """A session-reference service whose candidate lookups behave per query."""

    def __init__(self) -> None:
        self.signals: dict[str, asyncio.Event] = {}

    async def list_candidates(self, target, query="", limit=None, cancel=None):
        self.signals[query] = cancel
        if query == "failed":
            raise RuntimeError("store down")
        if query == "slow":
            await cancel.wait()
            raise RuntimeError("superseded")
        return []

    async def prepare(self, target, content, references, cancel=None):
        raise AssertionError("not used")


class CandidateSource:
    """A throwaway plugin offering `service`'s candidates through `dsh_register_completions`."""

    def __init__(self, service: Any) -> None:
        self.service = service

    @hookimpl
    def dsh_register_completions(self, host, register):
        register(SessionCompletions(self.service), "@name mentions a scripted session")


async def test_completion_fallbacks(bare_host, workspace):
    service = ScriptedCandidates()
    bare_host.pm.register(CandidateSource(service), name="candidates")
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        chat.type("plain" + TAB)
        await until(lambda: chat.ui.buffer.text == "plain")
        await chat.clear()
        chat.type("/he")
        await chat.wait_for_completion("/help")
        await chat.type_until(TAB, lambda: chat.ui.buffer.text == "/help ")
        await chat.clear()
        hints = "@path mentions a file · @name mentions a scripted session · Alt+Enter inserts a newline"
        await chat.type_until("/help" + ENTER, lambda: hints in chat.transcript, "the source's hint in /help")

        await chat.type_until("@failed", lambda: "failed" in service.signals)
        assert chat.completions() == []
        await chat.clear()

        await chat.type_until("@slow", lambda: "slow" in service.signals, "the slow lookup")
        slow = service.signals["slow"]
        await chat.type_until("x", lambda: "slowx" in service.signals, "the next lookup")
        assert slow.is_set()
        assert chat.ui.buffer.text == "@slowx"


# --- refused and failed references --------------------------------------------------------------------


async def test_a_failed_reference_restores_the_input_and_says_why(ref_host, workspace):
    target = ref_host.sessions.create(str(workspace), "main-session")
    async with open_chat(ref_host, target) as chat:
        chat.type(f"keep {format_mention('missing', 'Missing chat')}")
        chat.type(ENTER)
        await chat.wait_for_output("Session reference failed")
        assert 'failed to read referenced session: session "missing" not found' in chat.transcript
        await until(lambda: chat.ui.buffer.text.startswith("keep @["))
        assert chat.agent.sent == []


async def test_an_invalid_reference_is_refused_with_the_feature_mounted(ref_host, workspace):
    target = ref_host.sessions.create(str(workspace), "main-session")
    async with open_chat(ref_host, target) as chat:
        await chat.type_until("use dsh-session:IiJ" + ENTER, lambda: "Invalid session reference" in chat.transcript)
        assert 'invalid session reference URI "dsh-session:IiJ": URI is not canonical' in chat.transcript
        await until(lambda: chat.ui.buffer.text == "use dsh-session:IiJ")
        assert chat.agent.sent == []


async def test_without_the_feature_reference_shaped_text_goes_out_as_typed(bare_host, workspace):
    # Unlike the reference implementation (which refuses it as "capability unavailable"), a host without
    # session-reference behaves as if it were not installed, so no host code parses mentions.
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        mention = f"use {format_mention('source')} and dsh-session:IiJ"
        await chat.type_until(mention + ENTER, lambda: chat.agent.sent, "a send")
        assert chat.agent.sent == [([{"type": "text", "text": mention}], [])]
        assert "Session reference" not in chat.transcript


# --- duplicate Enter, drafts, disposal; Ctrl+C abandons a pending composition -------------------------


class ManualComposer:
    """A throwaway plugin whose `dsh_compose_message` compositions the test settles."""

    def __init__(self) -> None:
        self.pending: list[tuple[asyncio.Future[Any], str, asyncio.Event]] = []
        self.composing: list[asyncio.Task[Any]] = []
        """The UI's task behind each composition: it composes, then sends, steers or drops it."""

    @hookimpl
    def dsh_compose_message(self, agent, text, signal):
        outcome = asyncio.get_running_loop().create_future()
        self.pending.append((outcome, text, signal))
        task = asyncio.current_task()
        assert task is not None
        self.composing.append(task)
        return outcome

    def resolve(self, readable: str) -> None:
        outcome, _, _ = self.pending[-1]
        meta = {"kind": "session-reference", "references": []}
        outcome.set_result(Composition(({"type": "text", "text": readable},), ({"meta": meta},)))


@pytest.fixture
def composer(bare_host) -> ManualComposer:
    plugin = ManualComposer()
    bare_host.pm.register(plugin, name="manual-composer")
    return plugin


async def test_duplicate_enter_while_preparing_then_a_kept_draft(bare_host, workspace, composer):
    target = bare_host.sessions.create(str(workspace), "main-session")
    value = f"use {format_mention('source')}"
    async with open_chat(bare_host, target) as chat:
        await chat.type_until(value + ENTER, lambda: composer.pending, "a composition")
        assert chat.ui.submitter.preparing
        assert chat.ui.buffer.text == ""
        # Retype the same value and press Enter again: ignored while the first one prepares.
        await chat.type_until(value + ENTER, lambda: chat.ui.buffer.text == value)
        assert len(composer.pending) == 1
        composer.resolve("use @source")
        await until(lambda: chat.agent.sent, "the send")
        assert chat.agent.sent[0][0] == [{"type": "text", "text": "use @source"}]
        assert chat.ui.buffer.text == ""  # the retyped duplicate went with it

        await chat.type_until(value + ENTER, lambda: len(composer.pending) == 2)
        await chat.type_until("new draft", lambda: chat.ui.buffer.text == "new draft")
        composer.pending[-1][0].set_exception(ComposeError("Session reference failed: delayed failure"))
        await chat.wait_for_output("Session reference failed: delayed failure")
        assert chat.ui.buffer.text == "new draft"
        assert len(chat.agent.sent) == 1


async def test_ctrl_c_during_a_pending_composition_abandons_it_and_restores_the_input(bare_host, workspace, composer):
    target = bare_host.sessions.create(str(workspace), "main-session")
    value = f"use {format_mention('source')}"
    async with open_chat(bare_host, target) as chat:
        chat.agent.status = "running"  # Ctrl+C abandons the composition, not the turn
        await chat.type_until(value + ENTER, lambda: composer.pending, "a composition")
        _, text, signal = composer.pending[0]
        assert text == value and chat.ui.buffer.text == ""
        await chat.type_until(CTRL_C, lambda: chat.ui.buffer.text == value, "the input restored")
        assert signal.is_set() and not chat.ui.submitter.preparing
        assert chat.agent.cancels == 0
        composer.resolve("use @source")  # settles late: nothing is sent
        await composer.composing[0]
        assert chat.agent.sent == [] and chat.agent.steered == []
        # The restored text is submitted again as it stands.
        await chat.type_until(ENTER, lambda: len(composer.pending) == 2, "a second composition")
        composer.resolve("use @source")
        await until(lambda: chat.agent.steered, "the steer")


async def test_leaving_during_preparation_cancels_it_and_sends_nothing(bare_host, workspace, composer):
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        await chat.type_until(f"use {format_mention('source')}" + ENTER, lambda: composer.pending)
        agent = chat.agent
        # Ctrl+C abandons the composition (the text comes back), clears it, then leaves (twice).
        await chat.type_until(CTRL_C * 4, lambda: chat.task.done(), "the exit")
    _, _, signal = composer.pending[0]
    assert signal.is_set()
    composer.resolve("use @source")
    await composer.composing[0]
    assert agent.sent == []
    assert agent.status == "disposed"


async def test_disposing_during_a_composition_abandons_it(bare_host, workspace, composer):
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        await chat.type_until(f"use {format_mention('source')}" + ENTER, lambda: composer.pending)
        agent = chat.agent
        chat.ui.exit()  # Enter is disabled while composing, so /quit would not run
        await until(lambda: chat.task.done(), "the exit")
    assert composer.pending[0][2].is_set()
    composer.resolve("use @source")
    await composer.composing[0]
    assert agent.sent == []


# --- keys ---------------------------------------------------------------------------------------------


async def test_ctrl_c_cancels_a_running_turn_then_clears_then_exits(bare_host, workspace):
    target = bare_host.sessions.create(str(workspace))
    async with open_chat(bare_host, target) as chat:
        chat.agent.status = "running"
        chat.type("draft")
        await chat.type_until(CTRL_C, lambda: chat.agent.cancels == 1, "a cancel")
        assert chat.ui.buffer.text == "draft"
        await chat.type_until(ESCAPE, lambda: chat.agent.cancels == 2, "a cancel by Escape")
        chat.agent.status = "idle"
        await chat.clear()
        await chat.type_until(CTRL_C, lambda: "Press Ctrl+C again to exit." in chat.transcript)
        assert not chat.task.done()
        chat.type("x")  # typing disarms the exit
        await chat.clear()
        await chat.type_until(CTRL_C, lambda: chat.transcript.count("Press Ctrl+C again") == 2)
        await chat.type_until(CTRL_C, lambda: chat.task.done(), "the exit")


async def test_alt_enter_inserts_a_newline_and_enter_sends_both_lines(bare_host, workspace):
    target = bare_host.sessions.create(str(workspace))
    async with open_chat(bare_host, target) as chat:
        await chat.type_until("one\x1b\rtwo", lambda: chat.ui.buffer.text == "one\ntwo")
        await chat.type_until(ENTER, lambda: chat.agent.sent)
        assert chat.agent.sent == [([{"type": "text", "text": "one\ntwo"}], [])]


# --- the transcript -----------------------------------------------------------------------------------


async def test_logged_events_are_printed_escaped_and_streaming_shows_live(bare_host, workspace):
    target = bare_host.sessions.create(str(workspace))
    async with open_chat(bare_host, target) as chat:
        target.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        target.append("user/message", user_text(f"question {PROBE}"), surface_op="append")
        await chat.wait_for_output(f"question {ESCAPED}")
        target.append("step/start", {"turn": 1, "step": 1})
        chunk = {"type": "text-delta", "index": 0, "text": f"partial {PROBE}"}
        target.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
        assert chat.ui.preview
        assert "".join(text for _, text in chat.ui.preview.fragments()) == f" partial {ESCAPED}\n"
        assistant = {
            "turn": 1,
            "step": 1,
            "content": [{"type": "text", "text": f"partial {PROBE} done"}],
            "provenance": {"provider": "scripted", "model": "scripted"},
        }
        target.append("assistant/message", assistant, surface_op="append")
        assert not chat.ui.preview
        await chat.wait_for_output(f"partial {ESCAPED} done")
        assert "\x1b" not in chat.transcript and "\x9b" not in chat.transcript


async def test_the_banner_names_model_session_and_features(ref_host, workspace):
    target = ref_host.sessions.create(str(workspace), "banner-session")
    async with open_chat(ref_host, target) as chat:
        await chat.wait_for_output("banner-session")
        assert "scripted model (keyless)" in chat.transcript
        assert "features: session-reference" in chat.transcript
        assert "@ mentions files and sessions" in chat.transcript


async def test_without_session_reference_the_banner_says_at_mentions_files(bare_host, workspace):
    target = bare_host.sessions.create(str(workspace), "banner-session")
    async with open_chat(bare_host, target) as chat:
        await chat.wait_for_output("banner-session")
        assert "@ mentions files  ·" in chat.transcript


# --- slash commands -----------------------------------------------------------------------------------


class Greeter:
    """A plugin adding `/greet` through `dsh_register_slash_commands`."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, str]] = []

    @hookimpl
    def dsh_register_slash_commands(self, register):
        async def greet(ui, argument):
            self.calls.append((ui, argument))
            ui.notice(f"hello {argument}")

        register("greet", "Say hello", greet)
        register("shout", "Return a line", lambda ui, argument: f"{argument.upper()}!")
        register("broken", "Always fails", lambda ui, argument: 1 / 0)


async def test_plugins_add_slash_commands(bare_host, workspace):
    greeter = Greeter()
    bare_host.pm.register(greeter, name="greeter")
    target = bare_host.sessions.create(str(workspace))
    async with open_chat(bare_host, target) as chat:
        await chat.type_until("/help" + ENTER, lambda: "/greet  Say hello" in chat.transcript)
        await chat.type_until("/greet  the world " + ENTER, lambda: greeter.calls)
        assert greeter.calls == [(chat.ui, "the world")]
        await chat.wait_for_output("hello the world")
        await chat.type_until("/broken" + ENTER, lambda: "/broken failed: division by zero" in chat.transcript)
        await chat.type_until("/nope" + ENTER, lambda: "Unknown command /nope" in chat.transcript)
        assert chat.agent.sent == []


@pytest.mark.foreign_logs  # a hand-built log (no turns), not one dsh wrote
async def test_new_sessions_and_resume(bare_host, workspace):
    old = bare_host.sessions.create(str(workspace), "old-session", created_at=1)
    old.append("user/message", user_text("an old question"), surface_op="append")
    await bare_host.sessions.flush(old)
    bare_host.sessions.forget("old-session")
    first = bare_host.sessions.create(str(workspace), "first-session", created_at=2)
    async with open_chat(bare_host, first) as chat:
        first_agent = chat.agent
        await chat.type_until("/new" + ENTER, lambda: chat.ui.session is not first, "a new session")
        assert first_agent.status == "disposed"
        assert chat.agent is not first_agent
        new_id = chat.ui.session.id
        await chat.wait_for_output(f"session {new_id}")

        await chat.type_until("/sessions" + ENTER, lambda: "old-session" in chat.transcript)
        assert f"* {new_id}" in chat.transcript
        assert "first-session" in chat.transcript

        await chat.type_until("/resume" + ENTER, lambda: "Usage: /resume ID" in chat.transcript)
        await chat.type_until(
            "/resume nope" + ENTER, lambda: '/resume failed: session "nope" not found' in chat.transcript
        )
        await chat.type_until("/resume old-session" + ENTER, lambda: chat.ui.session.id == "old-session")
        await chat.wait_for_output("an old question")
        chat.type("hi" + ENTER)
        await until(lambda: chat.agent.sent)
        assert chat.agent.session.id == "old-session"

        await chat.type_until("/quit" + ENTER, lambda: chat.task.done(), "the exit")


async def test_resume_of_a_session_another_host_drives_says_so_and_stays(bare_host, make_host, workspace):
    driver = make_host()
    driving = await driver.open_agent(cwd=workspace)
    await driving.submit("driven elsewhere")  # its agent stays open: `driver` holds the lease
    first = bare_host.sessions.create(str(workspace), "first-session")
    busy = f'/resume failed: session "{driving.session.id}" is being driven by another dsh'
    async with open_chat(bare_host, first) as chat:
        await chat.type_until(f"/resume {driving.session.id}" + ENTER, lambda: busy in chat.transcript)
        assert chat.ui.session is first
        await chat.type_until("/quit" + ENTER, lambda: chat.task.done(), "the exit")
    await driving.close()


# --- with the real agent and the keyless model --------------------------------------------------------


async def test_a_real_turn_with_a_session_reference(ref_host, workspace):
    source = add_session(ref_host, "source-session", str(workspace), 1, title="Source session")
    source.append("user/message", user_text("Recent retained question."), surface_op="append")
    target = ref_host.sessions.create(str(workspace), "target-session", created_at=2)
    async with open_chat(ref_host, target, agent_factory=default_agent_factory) as chat:
        chat.type(f"Use {format_mention('source-session', 'Source session')}" + ENTER)
        await until(lambda: any(e.type == "turn/end" for e in target.events), "the turn")
        await chat.wait_for_output("Assistant")
        assert "Use @Source session" in chat.transcript
        assert "Referenced sessions · Source session (source-session)" in chat.transcript
        assert "Recent retained question." not in chat.transcript  # the snapshot stays hidden
        [message] = [e for e in target.events if e.type == "user/message"]
        assert message.data["envelope"]["displayContent"] == [{"type": "text", "text": "Use @Source session"}]
    assert chat.ui.agent.status == "disposed"


async def test_a_model_without_its_key_is_named_and_nothing_is_sent(make_host, workspace, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    host = make_host(config={"host": {"model": "openai:deepseek-chat"}})
    target = host.sessions.create(str(workspace), "keyless-target")
    problem = 'model "openai:deepseek-chat" needs an API key: set DEEPSEEK_API_KEY'
    async with open_chat(host, target, agent_factory=default_agent_factory) as chat:
        await chat.wait_for_output(f"{problem}; messages are not sent until then")
        assert "openai:deepseek-chat" in chat.transcript and "scripted model" not in chat.transcript
        await chat.type_until("hello" + ENTER, lambda: f"Message not sent: {problem}" in chat.transcript)
        assert chat.ui.buffer.text == "hello"  # kept, to send once the key is set
        # Commands still run: the chat reads and switches sessions, it only cannot send.
        await chat.clear()
        await chat.type_until("/help" + ENTER, lambda: "/new" in chat.transcript)
    assert [e.type for e in target.events if e.type in ("user/message", "assistant/message", "turn/start")] == []


@pytest.mark.foreign_logs  # a hand-built log (no turns), not one dsh wrote
async def test_open_session_continues_the_newest_session_of_this_directory(bare_host, workspace, tmp_path):
    older = bare_host.sessions.create(str(workspace), "older", created_at=1)
    newer = bare_host.sessions.create(str(workspace), "newer", created_at=2)
    bare_host.sessions.create(str(tmp_path), "elsewhere", created_at=3)
    for session in (older, newer):
        session.append("user/message", user_text("hi"), surface_op="append")
        await bare_host.sessions.flush(session)
    assert (await open_session(bare_host, continue_last=True)) is newer
    assert (await open_session(bare_host, session_id="older")) is older
    fresh = await open_session(bare_host)
    assert fresh.id not in ("older", "newer", "elsewhere")
    assert fresh.cwd == str(workspace)


async def test_continue_without_a_session_here_starts_a_new_one(bare_host, workspace, tmp_path):
    bare_host.sessions.create(str(tmp_path), "elsewhere", created_at=3)
    session = await open_session(bare_host, continue_last=True)
    assert session.id != "elsewhere" and session.cwd == str(workspace)


# --- steering ---------------------------------------------------------------------------------------


async def test_a_message_that_went_in_as_steering_wears_a_badge_until_a_step_writes_it(bare_host, workspace):
    target = bare_host.sessions.create(str(workspace), "main-session")
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=40, columns=160), term="xterm", enable_cpr=False)
    async with open_chat(bare_host, target, output=output) as chat:
        chat.agent.status = "running"
        # Pasted, so the controls reach the editor as text instead of acting as keys.
        await chat.type_until(f"\x1b[200~also {PROBE}\x1b[201~" + ENTER, lambda: chat.agent.steered, "a steer")
        assert [join_display_text(s.content) for s in chat.ui.steering] == [f"also {PROBE}"]
        await until(lambda: f"also {ESCAPED}" in screen.getvalue(), "the badge's text on screen")
        assert " Steering " in screen.getvalue()
        assert "\x1b]2;title" not in screen.getvalue() and "\x9b" not in screen.getvalue()
        await chat.type_until("and this" + ENTER, lambda: len(chat.agent.steered) == 2, "a second steer")
        assert len(chat.ui.steering) == 2

        # The loop writes the first as steering: its badge goes, the transcript labels it.
        target.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        data = {**user_text(f"also {PROBE}"), "turn": 1}
        target.append("steering/message", data, surface_op="append")
        await chat.wait_for_output(f"also {ESCAPED}")
        assert "Steering" in chat.transcript
        assert [join_display_text(s.content) for s in chat.ui.steering] == ["and this"]
        # The second is dropped (the turn was cancelled before a step read it): the UI says so.
        chat.agent.tickets[1].finish("dropped")
        await chat.wait_for_output("Steering dropped: and this")
        assert chat.ui.steering == []
        target.append("turn/end", {"turn": 1, "reason": {"kind": "aborted"}})


# --- the window title ---------------------------------------------------------------------------------


async def test_the_window_title_names_the_session_and_stays_terminal_safe(bare_host, workspace):
    target = bare_host.sessions.create(str(workspace), "title-session")
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=40, columns=160), term="xterm", enable_cpr=False)
    async with open_chat(bare_host, target, output=output) as chat:
        await until(lambda: "\x1b]2;dsh · title-session\x07" in screen.getvalue(), "the id as the title")
        # A hostile title: its OSC, BEL and C1 CSI must not end the title sequence early.
        target.append("turn/start", {"turn": 1, "trigger": {"kind": "session-title"}})
        target.append("session/title", {"title": f"plan {PROBE}", "messageSeqs": [], "source": "test"})
        target.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await until(lambda: f"\x1b]2;dsh · plan {ESCAPED}\x07" in screen.getvalue(), "the session's title")
        await chat.type_until("/new" + ENTER, lambda: chat.ui.session is not target, "a new session")
        new_id = chat.ui.session.id
        await until(lambda: f"\x1b]2;dsh · {new_id}\x07" in screen.getvalue(), "the new session's title")
    drawn = screen.getvalue()
    assert drawn.index("\x1b[22;0t") < drawn.index("\x1b]2;dsh · title-session\x07")
    assert drawn.endswith("\x1b]2;\x07\x1b[23;0t")
    assert "\x1b]2;title" not in drawn and "\x9b" not in drawn and "\x07\t" not in drawn


# --- a menu that fills itself -------------------------------------------------------------------------


class GrowingSource:
    """A plugin whose `@` source the test changes between answers: a pending status line, then items.

    `asked` lists the queries asked; the answer for a query in `held` waits for its event.
    """

    def __init__(self) -> None:
        self.items: list[str] = []
        self.status: str | None = None
        self.asked: list[str] = []
        self.held: dict[str, asyncio.Event] = {}

    @hookimpl
    def dsh_register_completions(self, host, register):
        register(self.complete)

    async def complete(self, agent, token, signal) -> list[MentionCompletion]:
        self.asked.append(token.query)
        if token.query in self.held:
            await self.held[token.query].wait()
        items = [MentionCompletion(f"@{name} ", f"Item · {name}") for name in self.items]
        if self.status is not None:
            items.append(MentionCompletion(token.prefix, self.status, pending=True))
        return items


async def test_an_open_menu_refills_itself_while_an_item_is_pending(bare_host, workspace):
    source = GrowingSource()
    bare_host.pm.register(source, name="growing")
    source.items, source.status = ["grow-a"], "indexing, 1 of 3"
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        chat.type("@grow")
        await chat.wait_for_completion("Item · grow-a")
        assert [shown for shown, _ in chat.completions()] == ["indexing, 1 of 3", "Item · grow-a"]

        source.items, source.status = ["grow-a", "grow-b"], "indexing, 2 of 3"  # no keystroke from here
        await chat.wait_for_completion("Item · grow-b")
        assert [shown for shown, _ in chat.completions()] == ["indexing, 2 of 3", "Item · grow-a", "Item · grow-b"]
        source.items, source.status = ["grow-a", "grow-b", "grow-c"], None
        await chat.wait_for_completion("Item · grow-c")
        assert [shown for shown, _ in chat.completions()] == ["Item · grow-a", "Item · grow-b", "Item · grow-c"]
        assert await chat.ui.completer.ask_again() is None  # nothing pending: no more refreshes
        assert chat.ui.buffer.text == "@grow"

        await chat.clear()
        source.status = "indexing, 3 of 4"
        chat.type("@grow")
        await chat.wait_for_completion("indexing, 3 of 4")
        await chat.type_until(ESCAPE, lambda: chat.ui.buffer.complete_state is None, "the menu's close")
        assert await chat.ui.completer.ask_again() is None  # closed on purpose: it stays closed


async def test_a_lone_pending_line_shows_once_asked_again(bare_host, workspace):
    source = GrowingSource()
    bare_host.pm.register(source, name="growing")
    source.status = "indexing, listing files"
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        # prompt_toolkit drops a lone item that would change nothing; the refresh shows it.
        chat.type("@grow")
        await chat.wait_for_completion("indexing, listing files")
        source.items, source.status = ["grow-a"], None
        await chat.wait_for_completion("Item · grow-a")
        assert [shown for shown, _ in chat.completions()] == ["Item · grow-a"]


# --- Tab while the menu's answer is in flight ---------------------------------------------------------


def press(chat: Chat, *keys: str) -> None:
    """`keys` handled before this returns, in one go (the pipe's keys are read whenever the loop gets to them)."""
    with set_app(chat.ui.app):
        processor = chat.ui.app.key_processor
        processor.feed_multiple([KeyPress(Keys.Tab if key == TAB else key) for key in keys])
        processor.process_keys()


@pytest.fixture
def held(bare_host: Host) -> GrowingSource:
    source = GrowingSource()
    source.items = ["walrus", "walrus-calf"]
    bare_host.pm.register(source, name="walruses")
    return source


@pytest.mark.parametrize("with_the_key", [False, True], ids=["request-running", "request-made-with-the-key"])
async def test_tab_before_the_answer_shows_chooses_its_first_row(bare_host, held, workspace, with_the_key):
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        chat.type("@wal")
        await chat.wait_for_completion("Item · walrus")
        held.held["walr"] = asyncio.Event()
        if with_the_key:
            press(chat, "r", TAB)  # the key's request is made but not started when Tab is handled
            assert chat.ui.buffer.complete_state is None
        else:
            await chat.type_until("r", lambda: "walr" in held.asked, "the request for @walr")
            # The request runs: prompt_toolkit's empty menu stands in for its answer and asks no more meanwhile.
            state = chat.ui.buffer.complete_state
            assert state is not None and state.completions == []
            press(chat, TAB)
        await until(lambda: "walr" in held.asked, "the request for @walr")
        assert chat.ui.buffer.text == "@walr"
        held.held["walr"].set()
        await until(lambda: chat.ui.buffer.text == "@walrus ", "Tab choosing the answer's first row")


async def test_a_key_typed_after_tab_cancels_its_choice_even_back_to_the_same_text(bare_host, held, workspace):
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        held.held["walr"] = asyncio.Event()
        await chat.type_until("@walr", lambda: "walr" in held.asked, "the request for @walr")
        press(chat, TAB, "u", Keys.Backspace)
        await until(lambda: held.asked.count("walr") == 2, "@walr asked again")
        held.held["walr"].set()
        await chat.wait_for_completion("Item · walrus")
        await asyncio.sleep(0)  # one turn of the loop: what the answer scheduled as its menu was made has run
        assert chat.ui.buffer.text == "@walr"
        assert [shown for shown, _ in chat.completions()] == ["Item · walrus", "Item · walrus-calf"]


async def test_tab_passes_over_a_status_line_for_the_first_row_under_it(bare_host, held, workspace):
    held.status = "indexing, 1 of 3"
    target = bare_host.sessions.create(str(workspace), "main-session")
    async with open_chat(bare_host, target) as chat:
        chat.type("@wal")
        await chat.wait_for_completion("Item · walrus-calf")
        assert [shown for shown, _ in chat.completions()] == ["indexing, 1 of 3", "Item · walrus", "Item · walrus-calf"]
        await chat.type_until(TAB, lambda: chat.ui.buffer.text == "@walrus ", "Tab choosing the first row")
        await chat.clear()

        held.held["walr"] = asyncio.Event()
        await chat.type_until("@walr", lambda: "walr" in held.asked, "the request for @walr")
        press(chat, TAB)
        held.held["walr"].set()
        await until(lambda: chat.ui.buffer.text == "@walrus ", "Tab choosing the answer's first row")
