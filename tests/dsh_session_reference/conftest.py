"""Session-reference fixtures: a compacted conversation log (on dsh_host.testing's `LogBuilder`) and hosts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dsh_host import Host
from dsh_host.testing import HostFactory, LogBuilder

L = LogBuilder
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
