"""Session builders and a stub summarizer shared by the compaction tests (the `fx` fixture).

`conversation(n)` is the reference fixture: n closed turns of `turn/start, user/message,
step/start, [request/header in turn 1], assistant/message, step/end, turn/end`, then turn n+1
left open. User texts are 326 characters (90 tokens) and assistant texts 331 (91 tokens).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from dsh_compact.summarizer import SummarizationInput, Summary
from dsh_compact.targets import CompactAgent
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session

USER_LENGTH = 326
ASSISTANT_LENGTH = 331
PROVIDER = "M"
MODEL = "M"


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def padded(prefix: str, length: int) -> str:
    return (prefix + " " + "x" * length)[:length]


def new_session(session_id: str = "s1") -> Session:
    ticks = itertools.count(1_700_000_000_000)
    return Session(SessionHeader(id=session_id, created_at=0), clock=lambda: next(ticks))


def header_data(provider: str = PROVIDER, model: str = MODEL, **extra: Any) -> dict[str, Any]:
    return {"header": {"config": {"provider": provider, "model": model}, **extra}, "reason": "initial"}


def user(session: Session, content: str) -> int:
    return session.append(
        "user/message", {"content": [text(content)], "source": {"kind": "user"}}, surface_op="append"
    ).seq


def assistant(session: Session, turn: int, step: int, blocks: Sequence[Mapping[str, Any]]) -> int:
    data = {
        "turn": turn,
        "step": step,
        "content": list(blocks),
        "provenance": {"provider": PROVIDER, "model": MODEL},
    }
    return session.append("assistant/message", data, surface_op="append", sources=[]).seq


def tool_result(session: Session, turn: int, step: int, call_id: str, content: str) -> int:
    call = session.append(
        "tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "read", "arguments": "{}"}
    )
    data = {"turn": turn, "step": step, "callId": call_id, "content": [text(content)], "isError": False}
    return session.append("tool/result", data, surface_op="append", sources=[call.seq]).seq


def conversation(turns: int, *, session: Session | None = None, header: Mapping[str, Any] | None = None) -> Session:
    session = session if session is not None else new_session()
    for turn in range(1, turns + 1):
        session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        user(session, padded(f"fixture user {turn}", USER_LENGTH))
        session.append("step/start", {"turn": turn, "step": 1})
        if turn == 1:
            session.append("request/header", header if header is not None else header_data())
        assistant(session, turn, 1, [text(padded(f"fixture assistant {turn}", ASSISTANT_LENGTH))])
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": turns + 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    return session


def tool_conversation(turns: int) -> Session:
    """Turns of `user, assistant(call), result, assistant(text)`, then an open turn."""
    session = new_session()
    for turn in range(1, turns + 1):
        session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        user(session, padded(f"tool user {turn}", 120))
        session.append("step/start", {"turn": turn, "step": 1})
        if turn == 1:
            session.append("request/header", header_data())
        call = {"type": "tool-call", "id": f"call-{turn}", "name": "read", "arguments": '{"path":"a.txt"}'}
        assistant(session, turn, 1, [call])
        tool_result(session, turn, 1, f"call-{turn}", padded(f"result {turn}", 120))
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("step/start", {"turn": turn, "step": 2})
        assistant(session, turn, 2, [text(padded(f"tool answer {turn}", 120))])
        session.append("step/end", {"turn": turn, "step": 2})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": turns + 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    return session


@dataclass
class StubSummarizer:
    """Answers every summarization with fixed blocks; records its inputs.

    `during(session)` runs while "summarizing" (to change the session under the transaction);
    `error` is raised instead of answering.
    """

    blocks: Sequence[Mapping[str, Any]] = (text("small checkpoint"),)
    provider: str = "summary-provider"
    model: str = "summary-model"
    max_tokens: int | None = 123
    error: BaseException | None = None
    during: Callable[[Session], None] | None = None
    calls: list[tuple[SummarizationInput, CompactAgent, asyncio.Event | None]] = field(default_factory=list)

    async def summarize(
        self, request: SummarizationInput, agent: CompactAgent, signal: asyncio.Event | None
    ) -> Summary:
        self.calls.append((request, agent, signal))
        if self.during is not None:
            self.during(agent.session)
        if self.error is not None:
            raise self.error
        return Summary(tuple(self.blocks), self.provider, self.model, self.max_tokens)


@pytest.fixture
def fx() -> ModuleType:
    """This module: tests build sessions with `fx.conversation(4)`, `fx.StubSummarizer()`, ..."""
    return sys.modules[__name__]
