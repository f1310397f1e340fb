"""Session-reference fixtures: a compacted conversation log (on dsh_host.testing's `LogBuilder`) and hosts."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from dsh_host import Host
from dsh_host.testing import HostFactory, LogBuilder

L = LogBuilder


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Everything the running loop's exception handler is asked to report during the test.

    "Task exception was never retrieved" and "Future exception was never retrieved" go through
    this handler when the unobserved future is collected (see `unreported_errors`).
    """
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    yield errors
    loop.set_exception_handler(previous)


async def unreported_errors(errors: list[dict[str, Any]]) -> list[str]:
    """The messages in `errors` (from `loop_errors`) once every other task of the loop is done and
    garbage is collected.

    A failed task nobody looked at is reported only when it is collected. Waiting for every task
    first (the done-callbacks they already had, such as the one that consumes an abandoned
    outcome, run before this wait's own) makes that report certain, however many loop rounds the
    abandoned work needed to finish.
    """
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others)
    del others  # a task still referenced here could not be collected, so never reported
    gc.collect()
    return [str(context.get("message")) for context in errors]


COMPACT = L.plugin("compact")
GOAL = L.plugin("goal")
WORKSPACE = L.plugin("workspace")
DELIMITER = "\n\n## My request:\n"
FIXTURE_SURFACE_SEQS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
"""The surface of `conversation()`: the checkpoint (seq 2) replaced entries 0-1, the chunk (13) is
log-only, and every other event appended itself."""


def conversation() -> list[dict[str, Any]]:
    """A compacted conversation, seqs 0-13, built with dsh_host.testing's `LogBuilder`."""
    return [
        L.user(0, "old user"),
        L.assistant(1, "old assistant"),
        L.user(2, "<compacted-summary>checkpoint</compacted-summary>", COMPACT, op=L.replace(0, 1)),
        L.user(3, "recent user"),
        L.context(4, "workspace secret", WORKSPACE),
        L.steering(5, "human steer"),
        L.steering(6, "plugin steer", GOAL),
        L.tool_result(7, "tool output"),
        L.assistant(8, [L.reasoning("private reasoning"), L.text("visible answer")]),
        L.user(9, "plugin-generated user", GOAL),
        L.user(10, [L.reasoning("only reasoning")]),
        L.steering(11, [L.reasoning("only reasoning")]),
        L.assistant(12, [L.reasoning("only reasoning")]),
        L.chunk(13, "unfinished answer"),
    ]


MakeHost = Callable[..., Host]
"""`make_host(**table)`: a host mounting only session-reference, with that table."""


@pytest.fixture
def make_host(make_host: HostFactory) -> MakeHost:
    """dsh_host.testing's `make_host`, narrowed: `make_host(**table)` mounts only session-reference
    with `[plugins.session-reference]` = `table`."""
    return lambda **table: make_host(["session-reference"], session_reference=table)
