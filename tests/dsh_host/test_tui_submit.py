"""The submission flow (compose, then send or abandon), driven without a terminal.

The agent composes (`await agent.compose(text, signal=...)`); here a fake agent whose
compositions the test settles by hand stands in for the `dsh_compose_message` hook.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh_host import DshError
from dsh_host.tui.submit import Submitter

CONTEXT = {
    "source": {"kind": "plugin", "plugin": "session-reference"},
    "content": [],
    "placement": "prompt-prefix",
}


@dataclass
class Editor:
    text: str = ""
    history: list[str] = field(default_factory=list)

    def add_history(self, text: str) -> None:
        self.history.append(text)


@dataclass
class Header:
    id: str
    cwd: str | None = "/workspace"


@dataclass
class Session:
    header: Header


@dataclass(frozen=True)
class Composition:
    content: list[Any]
    contexts: list[Any] = field(default_factory=list)


@dataclass
class Ticket:
    steering: bool


class Agent:
    """Composes plain text at once, or (`manual`) leaves each composition for the test to settle."""

    def __init__(self, session_id: str = "main-session") -> None:
        self.session = Session(Header(session_id))
        self.status = "idle"
        self.manual = False
        self.sent: list[tuple[list[Any], list[Any]]] = []
        self.steered: list[tuple[list[Any], list[Any]]] = []
        self.composing: list[tuple[str, asyncio.Event, asyncio.Future[Any]]] = []
        self.asked = asyncio.Event()
        """Set once a (`manual`) composition waits for the test to settle it."""

    async def compose(self, text, *, signal=None):
        if not self.manual:
            return Composition(text_blocks(text))
        outcome = asyncio.get_running_loop().create_future()
        self.composing.append((text, signal, outcome))
        self.asked.set()
        return await outcome

    def resolve(self, readable: str) -> None:
        self.composing[-1][2].set_result(Composition(text_blocks(readable), [CONTEXT]))

    def fail(self, error: BaseException) -> None:
        self.composing[-1][2].set_exception(error)

    def send(self, content, *, source=None, contexts=()):
        if self.status == "disposed":
            raise RuntimeError("agent is disposed")
        self.sent.append((content, list(contexts)))
        return Ticket(steering=False)

    def steer(self, content, *, source=None, contexts=()):
        self.steered.append((content, list(contexts)))
        return Ticket(steering=True)


class Harness:
    def __init__(self) -> None:
        self.editor = Editor()
        self.agent = Agent()
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.steered: list[Any] = []
        self.changes = 0
        self.submitter = Submitter(
            self.editor,
            agent=lambda: self.agent,
            run_command=self.commands.append,
            notify_error=self.errors.append,
            on_change=self._changed,
            on_steered=self.steered.append,
        )

    def _changed(self) -> None:
        self.changes += 1

    def type_and_submit(self, value: str) -> asyncio.Task[None] | None:
        self.editor.text = value
        return self.submitter.submit(value)

    async def submit(self, value: str) -> None:
        task = self.type_and_submit(value)
        if task is not None:
            await task


def text_blocks(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


MENTION = "use @[Source chat](dsh-session:InNvdXJjZSI)"


# --- commands and plain messages ----------------------------------------------------------------------


def test_blank_input_is_ignored_and_left_alone():
    h = Harness()
    assert h.type_and_submit(" \u3000\n") is None
    assert h.editor.text == " \u3000\n"
    assert h.agent.sent == [] and h.editor.history == []


async def test_a_plain_message_is_trimmed_composed_sent_and_remembered():
    h = Harness()
    await h.submit("  hello \n")
    assert h.agent.sent == [(text_blocks("hello"), [])]
    assert h.editor.text == ""
    assert h.editor.history == ["hello"]


async def test_a_plain_message_while_running_steers_and_is_reported_as_steering():
    h = Harness()
    h.agent.status = "running"
    await h.submit("also this")
    assert h.agent.steered == [(text_blocks("also this"), [])]
    assert h.agent.sent == []
    [steered] = h.steered
    assert steered.content == text_blocks("also this") and steered.ticket.steering


async def test_a_slash_command_is_recognised_on_the_raw_value():
    h = Harness()
    assert h.type_and_submit("/help  ") is None
    assert h.commands == ["/help"]
    assert h.agent.sent == []
    assert h.editor.text == ""
    await h.submit("  /help")  # leading spaces: an ordinary message
    assert h.commands == ["/help"]
    assert h.agent.sent == [(text_blocks("/help"), [])]


def test_mentions_inside_commands_are_never_composed():
    h = Harness()
    h.agent.manual = True
    h.type_and_submit("/resume dsh-session:IiJ")
    assert h.commands == ["/resume dsh-session:IiJ"]
    assert h.agent.composing == [] and h.errors == []


async def test_without_a_composing_plugin_reference_shaped_text_goes_out_as_typed():
    # A host without session-reference behaves as if it were not installed: nothing parses
    # mentions, so nothing refuses them either (the feature absent is not an error).
    h = Harness()
    await h.submit(f"{MENTION} and dsh-session:IiJ")
    assert h.agent.sent == [(text_blocks(f"{MENTION} and dsh-session:IiJ"), [])]
    assert h.errors == []


def test_a_disposed_agent_gets_nothing_and_says_so():
    h = Harness()
    h.agent.status = "disposed"
    assert h.type_and_submit("hello") is None
    assert h.agent.sent == []
    assert h.errors == ['Agent "main-session" is disposed.']


async def test_an_agent_refusing_a_message_is_reported():
    h = Harness()
    h.agent.send = lambda content, **_: (_ for _ in ()).throw(RuntimeError("inbox closed"))
    await h.submit("hello")
    assert h.errors == ["Message not sent: inbox closed"]


# --- composing --------------------------------------------------------------------------------------------


async def test_a_composition_is_awaited_then_sent_with_its_contexts():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    assert h.submitter.preparing
    assert h.editor.text == ""
    await h.agent.asked.wait()
    [(composed, signal, _)] = h.agent.composing
    assert composed == MENTION
    assert isinstance(signal, asyncio.Event) and not signal.is_set()
    h.agent.resolve("use @Source chat")
    await task
    assert h.agent.sent == [(text_blocks("use @Source chat"), [CONTEXT])]
    assert h.editor.history == [MENTION]
    assert not h.submitter.preparing
    assert h.changes == 2  # Enter disabled, then enabled again


async def test_send_or_steer_is_decided_when_composition_settles():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    h.agent.status = "running"
    h.agent.resolve("use @Source chat")
    await task
    assert h.agent.steered == [(text_blocks("use @Source chat"), [CONTEXT])]
    assert h.agent.sent == []


async def test_a_duplicate_enter_while_composing_does_nothing():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    # The same value retyped and submitted again while the first one is pending.
    assert h.type_and_submit(MENTION) is None
    assert h.editor.text == MENTION
    assert len(h.agent.composing) == 1
    h.agent.resolve("use @Source chat")
    await task
    assert h.agent.sent == [(text_blocks("use @Source chat"), [CONTEXT])]
    assert h.editor.text == ""  # the retyped duplicate is cleared with it


async def test_success_keeps_a_new_draft():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    h.editor.text = "new draft"
    h.agent.resolve("use @Source chat")
    await task
    assert h.editor.text == "new draft"
    assert len(h.agent.sent) == 1


async def test_a_failed_composition_restores_the_input_and_shows_its_one_line():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit("keep @[Missing chat](dsh-session:Im1pc3Npbmci)")
    await h.agent.asked.wait()
    h.agent.fail(DshError('Session reference failed: session "missing" not found'))
    await task
    assert h.agent.sent == []
    assert h.editor.text.startswith("keep @[")
    assert h.errors == ['Session reference failed: session "missing" not found']
    assert not h.submitter.preparing


async def test_a_failure_that_is_no_dsh_error_is_named():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    h.agent.fail(RuntimeError("delayed failure"))
    await task
    assert h.errors == ["Message not sent: RuntimeError('delayed failure')"]


async def test_failure_never_overwrites_a_new_draft():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    h.editor.text = "new draft"
    h.agent.fail(DshError("Session reference failed: delayed failure"))
    await task
    assert h.editor.text == "new draft"
    assert h.errors == ["Session reference failed: delayed failure"]


async def test_abort_abandons_the_composition_and_restores_the_input():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    [(_, signal, _)] = h.agent.composing
    assert h.submitter.abort()
    assert signal.is_set()
    assert h.editor.text == MENTION and not h.submitter.preparing
    assert not h.submitter.abort()  # nothing pending any more
    h.agent.resolve("use @Source chat")  # settles late: dropped
    await task
    assert h.agent.sent == [] and h.errors == [] and h.editor.history == []
    h.agent.manual = False
    await h.submit("next")  # Enter works again at once
    assert h.agent.sent == [(text_blocks("next"), [])]


async def test_dispose_abandons_the_composition_and_sends_nothing():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    signal = h.agent.composing[0][1]
    h.submitter.dispose()
    assert signal.is_set()
    h.agent.fail(DshError("cancelled"))
    await task
    assert h.agent.sent == [] and h.errors == []
    assert h.editor.text == ""


async def test_a_composition_settling_after_dispose_sends_nothing():
    h = Harness()
    h.agent.manual = True
    task = h.type_and_submit(MENTION)
    await h.agent.asked.wait()
    h.submitter.dispose()
    h.agent.resolve("use @Source chat")
    await task
    assert h.agent.sent == []
    assert h.submitter.submit("hello") is None


@pytest.mark.parametrize("status", ["idle", "running"])
async def test_an_awaitable_delivery_result_is_awaited_in_the_background(status):
    delivered = asyncio.Event()

    async def deliver(content, **_):
        delivered.set()

    h = Harness()
    h.agent.status = status
    h.agent.send = h.agent.steer = deliver
    await h.submit("hi")
    await asyncio.wait_for(delivered.wait(), 5)
