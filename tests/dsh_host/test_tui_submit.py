"""The submission flow of session-reference spec 9.3, driven without a terminal."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh_host.tui.submit import CAPABILITY_UNAVAILABLE, Submitter
from dsh_session_reference import SessionReferenceError, format_mention, parse_text, render_error_chain

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


class Agent:
    def __init__(self, session_id: str = "main-session") -> None:
        self.session = Session(Header(session_id))
        self.status = "idle"
        self.sent: list[tuple[list[Any], list[Any]]] = []
        self.steered: list[tuple[list[Any], list[Any]]] = []

    def send(self, content, *, source=None, contexts=()):
        if self.status == "disposed":
            raise RuntimeError("agent is disposed")
        self.sent.append((content, list(contexts)))

    def steer(self, content, *, source=None, contexts=()):
        self.steered.append((content, list(contexts)))


@dataclass
class Prepared:
    content: list[Any]
    contexts: list[Any]


class References:
    """A session-reference service whose `prepare` the test settles by hand."""

    parse_text = staticmethod(parse_text)
    format_mention = staticmethod(format_mention)
    describe_error = staticmethod(render_error_chain)

    def __init__(self) -> None:
        self.calls: list[tuple[Any, list[Any], list[Any], asyncio.Event]] = []
        self.outcome: asyncio.Future[Any] | None = None

    async def prepare(self, target, content, references, cancel=None):
        self.calls.append((target, content, references, cancel))
        self.outcome = asyncio.get_running_loop().create_future()
        return await self.outcome

    def resolve(self) -> None:
        _, content, _, _ = self.calls[-1]
        self.outcome.set_result(Prepared(content, [CONTEXT]))


class Harness:
    def __init__(self, *, service: Any = None) -> None:
        self.editor = Editor()
        self.agent = Agent()
        self.service = service
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.changes = 0
        self.submitter = Submitter(
            self.editor,
            agent=lambda: self.agent,
            service=lambda: self.service,
            run_command=self.commands.append,
            notify_error=self.errors.append,
            on_change=self._changed,
        )

    def _changed(self) -> None:
        self.changes += 1

    def type_and_submit(self, value: str) -> asyncio.Task[None] | None:
        self.editor.text = value
        return self.submitter.submit(value)


def text(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


SOURCE = format_mention("source", "Source chat")


# --- synchronous paths --------------------------------------------------------------------------------


def test_blank_input_is_ignored_and_left_alone():
    h = Harness()
    assert h.type_and_submit(" \u3000\n") is None
    assert h.editor.text == " \u3000\n"
    assert h.agent.sent == [] and h.editor.history == []


def test_a_plain_message_is_trimmed_sent_and_remembered():
    h = Harness()
    h.type_and_submit("  hello \n")
    assert h.agent.sent == [(text("hello"), [])]
    assert h.editor.text == ""
    assert h.editor.history == ["hello"]


def test_a_plain_message_while_running_steers():
    h = Harness()
    h.agent.status = "running"
    h.type_and_submit("also this")
    assert h.agent.steered == [(text("also this"), [])]
    assert h.agent.sent == []


def test_a_file_mention_is_plain_text_without_contexts():
    h = Harness(service=References())
    h.type_and_submit("read @src/source-file.ts ")
    assert h.agent.sent == [(text("read @src/source-file.ts"), [])]


def test_a_slash_command_is_recognised_on_the_raw_value():
    h = Harness()
    h.type_and_submit("/help  ")
    assert h.commands == ["/help"]
    assert h.agent.sent == []
    assert h.editor.text == ""
    h.type_and_submit("  /help")  # leading spaces: an ordinary message
    assert h.commands == ["/help"]
    assert h.agent.sent == [(text("/help"), [])]


def test_mentions_inside_commands_are_never_parsed():
    h = Harness()
    h.type_and_submit("/resume dsh-session:IiJ")
    assert h.commands == ["/resume dsh-session:IiJ"]
    assert h.errors == []


def test_an_invalid_reference_refuses_the_message_and_restores_the_input():
    h = Harness(service=References())
    h.type_and_submit("use dsh-session:IiJ")
    assert h.agent.sent == []
    assert h.editor.text == "use dsh-session:IiJ"
    assert h.errors == [
        'Invalid session reference: invalid session reference URI "dsh-session:IiJ": URI is not canonical'
    ]
    assert h.editor.history == []


def test_a_reference_without_the_service_is_refused():
    h = Harness(service=None)
    h.type_and_submit(f"use {SOURCE}")
    assert h.agent.sent == []
    assert h.editor.text == f"use {SOURCE}"
    assert h.errors == [CAPABILITY_UNAVAILABLE]


def test_without_the_service_text_without_references_goes_out_as_typed():
    h = Harness(service=None)
    h.type_and_submit("what is a dsh-session: URI? see @[x](https://example.test)")
    assert h.agent.sent == [(text("what is a dsh-session: URI? see @[x](https://example.test)"), [])]
    h.type_and_submit("use dsh-session:IiJ")  # reference-shaped: refused, not parsed
    assert h.errors == [CAPABILITY_UNAVAILABLE]


def test_a_disposed_agent_gets_nothing_and_says_so():
    h = Harness()
    h.agent.status = "disposed"
    h.type_and_submit("hello")
    assert h.agent.sent == []
    assert h.errors == ['Agent "main-session" is disposed.']


def test_an_agent_refusing_a_message_is_reported():
    h = Harness()
    h.agent.send = lambda content, **_: (_ for _ in ()).throw(RuntimeError("inbox closed"))
    h.type_and_submit("hello")
    assert h.errors == ["Message not sent: inbox closed"]


# --- preparation ----------------------------------------------------------------------------------------


async def test_a_reference_is_prepared_then_sent_with_its_context():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"use {SOURCE}")
    assert h.submitter.preparing
    assert h.editor.text == ""
    await asyncio.sleep(0)
    target, content, references, cancel = service.calls[0]
    assert target is h.agent
    assert content == text("use @Source chat")
    assert [(r.session_id, r.label) for r in references] == [("source", "Source chat")]
    assert isinstance(cancel, asyncio.Event) and not cancel.is_set()
    service.resolve()
    await task
    assert h.agent.sent == [(text("use @Source chat"), [CONTEXT])]
    assert h.editor.history == [f"use {SOURCE}"]
    assert not h.submitter.preparing
    assert h.changes == 2  # Enter disabled, then enabled again


async def test_send_or_steer_is_decided_when_preparation_settles():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"steer {SOURCE}")
    await asyncio.sleep(0)
    h.agent.status = "running"
    service.resolve()
    await task
    assert h.agent.steered == [(text("steer @Source chat"), [CONTEXT])]
    assert h.agent.sent == []


async def test_a_duplicate_enter_while_preparing_does_nothing():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"use {SOURCE}")
    await asyncio.sleep(0)
    # The same value retyped and submitted again while the first one is pending.
    assert h.type_and_submit(f"use {SOURCE}") is None
    assert h.editor.text == f"use {SOURCE}"
    assert len(service.calls) == 1
    service.resolve()
    await task
    assert h.agent.sent == [(text("use @Source chat"), [CONTEXT])]
    assert h.editor.text == ""  # the retyped duplicate is cleared with it


async def test_success_keeps_a_new_draft():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"use {SOURCE}")
    await asyncio.sleep(0)
    h.editor.text = "new draft"
    service.resolve()
    await task
    assert h.editor.text == "new draft"
    assert len(h.agent.sent) == 1


async def test_failure_restores_the_input_and_reports_the_error_chain():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"keep {format_mention('missing', 'Missing chat')}")
    await asyncio.sleep(0)
    inner = LookupError('session "missing" not found')
    failure = SessionReferenceError(
        "SESSION_REFERENCE_READ_FAILED", f"failed to read referenced session: {inner}", inner
    )
    service.outcome.set_exception(failure)
    await task
    assert h.agent.sent == []
    assert h.editor.text.startswith("keep @[")
    assert h.errors == [
        'Session reference failed: failed to read referenced session: session "missing" not found: '
        'session "missing" not found'
    ]
    assert not h.submitter.preparing


async def test_failure_never_overwrites_a_new_draft():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"use {SOURCE}")
    await asyncio.sleep(0)
    h.editor.text = "new draft"
    service.outcome.set_exception(RuntimeError("delayed failure"))
    await task
    assert h.editor.text == "new draft"
    assert h.errors == ["Session reference failed: delayed failure"]


async def test_dispose_cancels_the_preparation_and_sends_nothing():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"use {SOURCE}")
    await asyncio.sleep(0)
    cancel = service.calls[0][3]
    h.submitter.dispose()
    assert cancel.is_set()
    service.outcome.set_exception(SessionReferenceError("SESSION_REFERENCE_CANCELLED", "cancelled"))
    await task
    assert h.agent.sent == [] and h.errors == []
    assert h.editor.text == ""


async def test_a_preparation_resolving_after_dispose_sends_nothing():
    service = References()
    h = Harness(service=service)
    task = h.type_and_submit(f"use {SOURCE}")
    await asyncio.sleep(0)
    h.submitter.dispose()
    service.resolve()
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
    h.type_and_submit("hi")
    await asyncio.wait_for(delivered.wait(), 5)
