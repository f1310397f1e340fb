"""`prepare` failures in the order they are checked, cancellation, and service configuration."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dsh_host.host import Host
from dsh_host.query import SurfaceSnapshot, SurfaceTexts, texts_of
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session
from dsh_host.store.base import SessionNotFound
from dsh_session_reference import (
    ErrorCode,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    render_error_chain,
)
from tests.dsh_session_reference.conftest import MakeHost, unreported_errors

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs

USER = {"kind": "user"}
TARGET = SessionHeader(id="target", created_at=0, cwd="/target")
CANCELLED_MESSAGE = "session reference preparation was cancelled"


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def snapshot(session_id: str) -> SurfaceSnapshot:
    event = {
        "type": "user/message",
        "seq": 0,
        "time": 0,
        "surfaceOp": "append",
        "data": {"content": [text(f"hello from {session_id}")], "source": USER},
    }
    return SurfaceSnapshot(SessionHeader(id=session_id, created_at=0, cwd=None), 0, [event])


class ScriptedQuery:
    """A query service whose `read_surface` runs `behaviour(session_id)`; reads are recorded."""

    def __init__(self, behaviour: Callable[[str], Awaitable[SurfaceSnapshot]] | None = None) -> None:
        self.reads: list[str] = []
        self._behaviour = behaviour

    async def read_surface_texts(self, session_ids: list[str]) -> list[SurfaceTexts]:

        # Every read is issued before any is awaited, as the host's one-request batch does.

        snapshots = await asyncio.gather(*(self.read_surface(i) for i in session_ids))

        return [texts_of(snapshot) for snapshot in snapshots]

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        self.reads.append(session_id)
        if self._behaviour is None:
            return snapshot(session_id)
        return await self._behaviour(session_id)


def signal(reason: str | None = None, *, set_: bool = False) -> asyncio.Event:
    """A cancel signal: an `asyncio.Event` carrying the abort reason."""
    event = asyncio.Event()
    event.reason = reason  # type: ignore[attr-defined]
    if set_:
        event.set()
    return event


# --- failures on a real host ----------------------------------------------------------------------


@pytest.fixture
def host(make_host: MakeHost) -> Host:
    started = make_host(max_references=2)
    for session_id in ("one", "two"):
        session = Session(SessionHeader(id=session_id, created_at=0, cwd=f"/{session_id}"))
        session.append(
            "user/message", {"content": [text(f"{session_id} says hi")], "source": USER}, surface_op="append"
        )
        started.store.append(session.header, list(session.events))
    started.sessions.create("/target", "target")
    return started


async def prepare(host: Host, references: list[Any], cancel: Any = None):
    target = host.sessions.get("target")
    return await host.services.session_references.prepare(target, [text("q")], references, cancel)


async def expect_error(awaitable: Awaitable[Any], code: str, message: str | None = None) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as info:
        await awaitable
    assert info.value.code == code
    if message is not None:
        assert str(info.value) == message
        assert info.value.message == message
    return info.value


async def test_no_references_returns_a_copy_and_no_context(host: Host) -> None:
    content = [text("nothing to see"), {"type": "image", "data": "xyz", "nested": [1, {"a": None}]}]
    prepared = await host.services.session_references.prepare(host.sessions.get("target"), content, [])
    assert prepared.content == content
    assert prepared.content is not content
    assert prepared.content[1]["nested"] is not content[1]["nested"]
    assert prepared.contexts == []
    assert prepared.to_json() == {"content": content, "contexts": []}


async def test_no_references_skips_the_cancellation_check(host: Host) -> None:
    prepared = await prepare(host, [], signal("host cancelled", set_=True))
    assert prepared.contexts == []


async def test_duplicate_references_keep_the_first_label(host: Host) -> None:
    refs = [
        {"sessionId": "one", "label": "first"},
        {"sessionId": "one", "label": "ignored duplicate"},
        {"sessionId": "two"},
    ]
    prepared = await prepare(host, refs)
    meta = prepared.contexts[0]["meta"]["references"]
    assert [(r["sessionId"], r["label"], r["inputIndex"]) for r in meta] == [
        ("one", "first", 0),
        ("two", "two", 1),
    ]
    prompt = prepared.contexts[0]["content"][0]["text"]
    assert '"label":"first"' in prompt and "ignored duplicate" not in prompt


async def test_a_self_reference_is_refused(host: Host) -> None:
    await expect_error(
        prepare(host, [{"sessionId": "target"}]),
        ErrorCode.SELF_REFERENCE,
        'session "target" cannot reference itself',
    )


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (None, "session reference must be an object"),
        (1, "session reference must be an object"),
        ("one", "session reference must be an object"),
        ({"sessionId": 1}, "session reference must contain a string sessionId and optional string label"),
        ({}, "session reference must contain a string sessionId and optional string label"),
        (
            {"sessionId": "one", "label": None},
            "session reference must contain a string sessionId and optional string label",
        ),
        (
            {"sessionId": "one", "label": 7},
            "session reference must contain a string sessionId and optional string label",
        ),
        (["one"], "session reference must contain a string sessionId and optional string label"),
        (
            SessionReferenceInput(1),
            "session reference must contain a string sessionId and optional string label",
        ),
        (
            SessionReferenceInput("one", 2),
            "session reference must contain a string sessionId and optional string label",
        ),
    ],
)
async def test_invalid_references_are_refused(host: Host, reference: Any, message: str) -> None:
    await expect_error(prepare(host, [reference]), ErrorCode.INVALID_REFERENCE, message)


async def test_later_duplicates_are_still_validated(host: Host) -> None:
    await expect_error(
        prepare(host, [{"sessionId": "one"}, {"sessionId": "one", "label": 5}]), ErrorCode.INVALID_REFERENCE
    )


async def test_per_entry_checks_run_in_order_and_beat_too_many(host: Host) -> None:
    await expect_error(prepare(host, [None, {"sessionId": "target"}]), ErrorCode.INVALID_REFERENCE)
    await expect_error(prepare(host, [{"sessionId": "target"}, None]), ErrorCode.SELF_REFERENCE)
    too_many_then_self = [{"sessionId": s} for s in ("one", "two", "three", "target")]
    await expect_error(prepare(host, too_many_then_self), ErrorCode.SELF_REFERENCE)
    await expect_error(prepare(host, [*too_many_then_self[:3], 5]), ErrorCode.INVALID_REFERENCE)


async def test_too_many_references_fail_before_any_read() -> None:
    query = ScriptedQuery()
    service = SessionReferenceService(query, max_references=2)
    refs = [{"sessionId": s} for s in ("one", "two", "three")]
    await expect_error(
        service.prepare(TARGET, [text("q")], refs),
        ErrorCode.TOO_MANY,
        "a message may reference at most 2 sessions",
    )
    assert query.reads == []
    # Duplicates do not count towards the limit.
    await service.prepare(TARGET, [text("q")], [*refs[:2], {"sessionId": "one"}])


async def test_too_many_references_fail_on_the_host(host: Host) -> None:
    await expect_error(
        prepare(host, [{"sessionId": s} for s in ("one", "two", "three")]),
        ErrorCode.TOO_MANY,
        "a message may reference at most 2 sessions",
    )


async def test_a_missing_source_fails_the_read(host: Host) -> None:
    error = await expect_error(
        prepare(host, [{"sessionId": "one"}, {"sessionId": "missing"}]),
        ErrorCode.READ_FAILED,
        'failed to read referenced session: session "missing" not found',
    )
    assert isinstance(error.cause, SessionNotFound)
    assert error.__cause__ is error.cause
    assert render_error_chain(error) == (
        'failed to read referenced session: session "missing" not found: session "missing" not found'
    )


@pytest.mark.parametrize("with_signal", [False, True])
async def test_a_failing_read_is_read_failed(with_signal: bool) -> None:
    failure = RuntimeError("non-error read failure")

    async def fail(_: str) -> SurfaceSnapshot:
        raise failure

    service = SessionReferenceService(ScriptedQuery(fail))
    cancel = signal() if with_signal else None
    error = await expect_error(
        service.prepare(TARGET, [text("q")], [{"sessionId": "one"}], cancel),
        ErrorCode.READ_FAILED,
        "failed to read referenced session: non-error read failure",
    )
    assert error.cause is failure


async def test_the_first_read_failure_wins_and_other_failures_stay_quiet(loop_errors: list[dict[str, Any]]) -> None:
    release = asyncio.Event()
    finished = asyncio.Event()

    async def behaviour(session_id: str) -> SurfaceSnapshot:
        if session_id == "first":
            raise RuntimeError("first failure")
        try:
            await release.wait()
            raise RuntimeError(f"{session_id} failed later")
        finally:
            finished.set()

    query = ScriptedQuery(behaviour)
    service = SessionReferenceService(query)
    await expect_error(
        service.prepare(TARGET, [text("q")], [{"sessionId": "first"}, {"sessionId": "second"}]),
        ErrorCode.READ_FAILED,
        "failed to read referenced session: first failure",
    )
    release.set()
    assert await unreported_errors(loop_errors) == []


async def test_a_cancel_during_a_read_that_then_fails_is_cancelled() -> None:
    cancel = signal("cancelled during read")

    async def abort_then_fail(_: str) -> SurfaceSnapshot:
        cancel.set()
        raise RuntimeError("read interrupted")

    service = SessionReferenceService(ScriptedQuery(abort_then_fail))
    error = await expect_error(
        service.prepare(TARGET, [text("q")], [{"sessionId": "one"}], cancel),
        ErrorCode.CANCELLED,
        CANCELLED_MESSAGE,
    )
    assert error.cause == "cancelled during read"


async def test_a_cancel_wins_over_a_read_that_never_finishes(loop_errors: list[dict[str, Any]]) -> None:
    release = asyncio.Event()
    started = asyncio.Event()
    finished = asyncio.Event()

    async def hang(session_id: str) -> SurfaceSnapshot:
        if session_id == "quick":
            return snapshot(session_id)
        started.set()
        try:
            await release.wait()
            raise RuntimeError("storage finally failed")
        finally:
            finished.set()

    service = SessionReferenceService(ScriptedQuery(hang))
    cancel = signal("cancelled while storage remained pending")
    task = asyncio.ensure_future(
        service.prepare(TARGET, [text("q")], [{"sessionId": "quick"}, {"sessionId": "slow"}], cancel)
    )
    await started.wait()
    assert not task.done()  # the slow read holds it
    cancel.set()
    await asyncio.wait({task})
    assert not release.is_set() and not finished.is_set()
    error = await expect_error(task, ErrorCode.CANCELLED, CANCELLED_MESSAGE)
    assert error.cause == "cancelled while storage remained pending"
    del error, task  # the error's traceback holds the abandoned read, which must be collectable

    # The abandoned read settles later, harmlessly.
    release.set()
    assert await unreported_errors(loop_errors) == []


async def test_abandoned_read_that_succeeds_late_is_ignored(loop_errors: list[dict[str, Any]]) -> None:
    release = asyncio.Event()
    reading = asyncio.Event()

    async def slow(session_id: str) -> SurfaceSnapshot:
        reading.set()
        await release.wait()
        return snapshot(session_id)

    service = SessionReferenceService(ScriptedQuery(slow))
    cancel = signal("superseded")
    task = asyncio.ensure_future(service.prepare(TARGET, [text("q")], [{"sessionId": "one"}], cancel))
    await reading.wait()
    cancel.set()
    await expect_error(task, ErrorCode.CANCELLED)
    release.set()
    assert await unreported_errors(loop_errors) == []


async def test_caller_cancelled_while_reads_hang_leaves_no_unretrieved_error(
    loop_errors: list[dict[str, Any]],
) -> None:
    release = asyncio.Event()
    reading = asyncio.Event()

    async def hang(session_id: str) -> SurfaceSnapshot:
        reading.set()
        await release.wait()
        raise RuntimeError("late failure")

    service = SessionReferenceService(ScriptedQuery(hang))
    task = asyncio.ensure_future(service.prepare(TARGET, [text("q")], [{"sessionId": "one"}], signal()))
    await reading.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert await unreported_errors(loop_errors) == []


async def test_unretrieved_errors_are_detected(loop_errors: list[dict[str, Any]]) -> None:
    """Control for the checks above: an abandoned failed task does reach the handler."""

    async def boom() -> None:
        raise RuntimeError("nobody looks at me")

    task = asyncio.ensure_future(boom())
    await asyncio.wait({task})  # done, and its exception never looked at
    del task
    assert any("never retrieved" in message for message in await unreported_errors(loop_errors))


async def test_an_already_cancelled_signal_reads_nothing() -> None:
    query = ScriptedQuery()
    service = SessionReferenceService(query)
    error = await expect_error(
        service.prepare(TARGET, [text("q")], [{"sessionId": "one"}], signal("host cancelled", set_=True)),
        ErrorCode.CANCELLED,
        CANCELLED_MESSAGE,
    )
    assert error.cause == "host cancelled"
    assert query.reads == []


async def test_validation_precedes_cancellation() -> None:
    service = SessionReferenceService(ScriptedQuery(), max_references=1)
    done = signal("host cancelled", set_=True)
    await expect_error(service.prepare(TARGET, [], [None], done), ErrorCode.INVALID_REFERENCE)
    await expect_error(service.prepare(TARGET, [], [{"sessionId": "target"}], done), ErrorCode.SELF_REFERENCE)
    await expect_error(service.prepare(TARGET, [], [{"sessionId": "a"}, {"sessionId": "b"}], done), ErrorCode.TOO_MANY)


async def test_an_already_cancelled_signal_reads_nothing_on_the_host(host: Host) -> None:
    await expect_error(prepare(host, [{"sessionId": "one"}], signal("host cancelled", set_=True)), ErrorCode.CANCELLED)


async def test_a_fresh_signal_does_not_change_the_result(host: Host) -> None:
    with_signal = await prepare(host, [{"sessionId": "one"}, {"sessionId": "two"}], signal())
    without = await prepare(host, [{"sessionId": "one"}, {"sessionId": "two"}])
    assert with_signal.to_json() == without.to_json()


# --- configuration ---------------------------------------------------------------------------------


def make_service(**config: Any) -> SessionReferenceService:
    return SessionReferenceService(ScriptedQuery(), **config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max_references": 0}, "session-reference: maxReferences must be a positive safe integer"),
        ({"max_references": 4}, "session-reference: maxReferences must not exceed 3"),
        ({"max_references": True}, "session-reference: maxReferences must be a positive safe integer"),
        ({"max_references": 1.5}, "session-reference: maxReferences must be a positive safe integer"),
        ({"candidate_limit": 0}, "session-reference: candidateLimit must be a positive safe integer"),
        (
            {"candidate_limit": float("nan")},
            "session-reference: candidateLimit must be a positive safe integer",
        ),
        ({"max_reference_bytes": -1}, "session-reference: maxReferenceBytes must be a positive safe integer"),
        (
            {"max_reference_bytes": 2**53},
            "session-reference: maxReferenceBytes must be a positive safe integer",
        ),
        (
            {"max_reference_bytes": float("inf")},
            "session-reference: maxReferenceBytes must be a positive safe integer",
        ),
        # Key order decides which failure is reported; the `<= 3` check comes last.
        (
            {"max_references": 4, "candidate_limit": 0},
            "session-reference: candidateLimit must be a positive safe integer",
        ),
        (
            {"candidate_limit": 0, "max_reference_bytes": 0},
            "session-reference: candidateLimit must be a positive safe integer",
        ),
    ],
)
def test_an_invalid_service_configuration_is_refused(config: dict[str, Any], message: str) -> None:
    with pytest.raises(SessionReferenceError) as info:
        make_service(**config)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert str(info.value) == message


def test_service_configuration_defaults_and_limits() -> None:
    service = make_service()
    assert (service.max_references, service.candidate_limit, service.max_reference_bytes) == (3, 50, 65536)
    big = make_service(max_references=1, candidate_limit=2**53 - 1, max_reference_bytes=2**53 - 1)
    assert (big.max_references, big.candidate_limit, big.max_reference_bytes) == (1, 2**53 - 1, 2**53 - 1)


def test_service_exposes_the_pure_helpers() -> None:
    mention = SessionReferenceService.format_mention("source", "Source")
    assert mention == "@[Source](dsh-session:InNvdXJjZSI)"
    parsed = make_service().parse_text(f"use {mention}")
    assert parsed.text == "use @Source"
    assert [(r.session_id, r.label) for r in parsed.references] == [("source", "Source")]
