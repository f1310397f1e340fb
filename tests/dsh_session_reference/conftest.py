"""Builders for session-reference tests: events in log JSON form and the spec's fixture log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from dsh_host import Host
from dsh_host.testing import HostFactory

USER = {"kind": "user"}
COMPACT = {"kind": "plugin", "plugin": "compact"}
GOAL = {"kind": "plugin", "plugin": "goal"}
WORKSPACE = {"kind": "plugin", "plugin": "workspace"}
DELIMITER = "\n\n## My request:\n"


@dataclass(frozen=True)
class Header:
    """The slice of a session header projection reads."""

    id: str
    cwd: str | None = None


class LogBuilder:
    """Events as the session log stores them (camelCase keys, ``surfaceOp`` on surface types)."""

    Header = Header
    USER = USER
    COMPACT = COMPACT
    GOAL = GOAL
    DELIMITER = DELIMITER
    # The fixture's surface: the checkpoint (seq 2) replaced entries 0-1, the chunk (13) is
    # log-only, and every other event appended itself.
    FIXTURE_SURFACE_SEQS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)

    @staticmethod
    def text(text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    @staticmethod
    def reasoning(text: str) -> dict[str, Any]:
        return {"type": "reasoning", "text": text}

    @staticmethod
    def event(seq: int, event_type: str, data: dict[str, Any], surface_op: Any = "append") -> dict[str, Any]:
        event = {"type": event_type, "seq": seq, "time": 1_000 + seq, "data": data}
        if surface_op is not None:
            event["surfaceOp"] = surface_op
        return event

    def user(
        self,
        seq: int,
        content: list[dict[str, Any]] | str,
        source: dict[str, Any] = USER,
        envelope: dict[str, Any] | None = None,
        surface_op: Any = "append",
    ) -> dict[str, Any]:
        data: dict[str, Any] = {"content": self._content(content), "source": source}
        if envelope is not None:
            data["envelope"] = envelope
        return self.event(seq, "user/message", data, surface_op)

    def steering(self, seq: int, content: list[dict[str, Any]] | str, source: dict[str, Any] = USER) -> dict[str, Any]:
        return self.event(seq, "steering/message", {"content": self._content(content), "source": source, "turn": 1})

    def assistant(self, seq: int, content: list[dict[str, Any]] | str) -> dict[str, Any]:
        data = {
            "turn": 1,
            "step": 0,
            "content": self._content(content),
            "provenance": {"provider": "mock", "model": "mock"},
        }
        return self.event(seq, "assistant/message", data)

    def context(self, seq: int, text: str, source: dict[str, Any]) -> dict[str, Any]:
        return self.event(seq, "context/message", {"content": [self.text(text)], "source": source})

    def tool_result(self, seq: int, text: str) -> dict[str, Any]:
        data = {"turn": 1, "step": 0, "callId": "call-1", "content": [self.text(text)], "isError": False}
        return self.event(seq, "tool/result", data)

    def chunk(self, seq: int, text: str) -> dict[str, Any]:
        chunk = {"type": "text-delta", "index": 0, "text": text}
        return self.event(seq, "assistant/chunk", {"turn": 1, "step": 0, "chunk": chunk}, surface_op=None)

    def conversation(self) -> list[dict[str, Any]]:
        """The spec's ``appendConversation`` log, seqs 0-13 (§10.1)."""
        return [
            self.user(0, "old user"),
            self.assistant(1, "old assistant"),
            self.user(
                2,
                "<compacted-summary>checkpoint</compacted-summary>",
                source=COMPACT,
                surface_op={"op": "replace", "start": 0, "end": 1},
            ),
            self.user(3, "recent user"),
            self.context(4, "workspace secret", WORKSPACE),
            self.steering(5, "human steer"),
            self.steering(6, "plugin steer", source=GOAL),
            self.tool_result(7, "tool output"),
            self.assistant(8, [self.reasoning("private reasoning"), self.text("visible answer")]),
            self.user(9, "plugin-generated user", source=GOAL),
            self.user(10, [self.reasoning("only reasoning")]),
            self.steering(11, [self.reasoning("only reasoning")]),
            self.assistant(12, [self.reasoning("only reasoning")]),
            self.chunk(13, "unfinished answer"),
        ]

    @staticmethod
    def surface(log: list[dict[str, Any]], seqs: tuple[int, ...]) -> list[dict[str, Any]]:
        """The events of ``log`` at ``seqs``, in that order (a hand-folded surface)."""
        by_seq = {event["seq"]: event for event in log}
        return [by_seq[seq] for seq in seqs]

    def _content(self, content: list[dict[str, Any]] | str) -> list[dict[str, Any]]:
        return [self.text(content)] if isinstance(content, str) else content


@pytest.fixture(scope="session")
def logs() -> LogBuilder:
    return LogBuilder()


MakeHost = Callable[..., Host]
"""`make_host(**table)`: a host mounting only session-reference, with that table."""


@pytest.fixture
def make_host(make_host: HostFactory) -> MakeHost:
    """dsh_host.testing's `make_host`, narrowed: `make_host(**table)` mounts only session-reference
    with `[plugins.session-reference]` = `table`."""
    return lambda **table: make_host(["session-reference"], session_reference=table)
