"""A session reference through the real agent loop, keyless, with the exact bytes of the prompt.

A source session whose old user and assistant messages were replaced by a compaction
checkpoint is stored in SQLite; a target session created by the registry mentions it; the
session-reference service parses and prepares the typed text; the real agent sends it to a
scripted model that refuses any request whose last message is not [snapshot, delimiter,
prompt]. The captured request's snapshot is compared byte for byte with the full prompt the
reference implementation sends for the same source. Afterwards the source grows, is compacted
again and is deleted: the target's stored log and every request rebuilt from it stay exactly as
they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_host import Agent
from dsh_host.host import Host
from dsh_host.log import rebuild_request, request_json
from dsh_host.models.base import ModelRequest
from dsh_host.models.scripted import ScriptedAdapter, text_response
from dsh_host.session.session import Session
from dsh_host.testing import HostFactory
from tests.e2e.e2e_support import COMPACT_SOURCE, DELIMITER, PREFIX, REFERENCE_SOURCE, SUFFIX, WARNING

CWD = "/workspace/project"
TYPED = "Use @[Source session](dsh-session:InNvdXJjZS1zZXNzaW9uIg)"
DISPLAY = "Use @Source session"
REPLY = "Combined reference request accepted."
SHADOWED = ("SHADOWED OLD USER", "SHADOWED OLD ASSISTANT")
LATER = "LATER SOURCE MUTATION"

# The reference implementation's full prompt, with the capture seq left open: the reference
# appended the four source events bare (capture seq 3); this source has the turn/step structure
# around them.
GOLDEN_FULL_PROMPT = (
    PREFIX
    + '[{"sessionId":"source-session","label":"Source session","cwd":"/workspace/project",'
    + '"capturedThroughSeq":{seq},"conversation":[{"role":"user","text":"\\u003ccompacted-summary>'
    + 'Retained checkpoint.\\u003c/compacted-summary>"},{"role":"user","text":"Recent retained question."}]}]'
    + SUFFIX
)


def _text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


@pytest.fixture
def host(make_host: HostFactory, tmp_path: Path) -> Host:
    return make_host(["compact", "session-reference"], data_dir=tmp_path / "dsh-home")


def _message_turn(session: Session, turn: int, user: str, assistant: str | None) -> None:
    """One turn as the agent writes it: the user's message, then (optionally) a one-step reply."""
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    session.append("user/message", {"content": [_text(user)], "source": {"kind": "user"}}, surface_op="append")
    if assistant is not None:
        session.append("step/start", {"turn": turn, "step": 1})
        provenance = {"provider": "scripted", "model": "scripted"}
        data = {"turn": turn, "step": 1, "content": [_text(assistant)], "provenance": provenance}
        session.append("assistant/message", data, surface_op="append")
        session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


async def _store_source(host: Host) -> int:
    """The compacted source, flushed to SQLite and no longer live; returns its last seq."""
    source = host.sessions.create(CWD, "source-session", created_at=1)
    _message_turn(source, 1, SHADOWED[0], SHADOWED[1])
    user_seq = next(e.seq for e in source.events if e.type == "user/message")
    assistant_seq = next(e.seq for e in source.events if e.type == "assistant/message")
    source.append("turn/start", {"turn": 2, "trigger": {"kind": "compact", "source": {"kind": "user"}}})
    start = source.append("compact/start", {"turn": 2})
    source.append(
        "user/message",
        {"content": [_text("<compacted-summary>Retained checkpoint.</compacted-summary>")], "source": COMPACT_SOURCE},
        surface_op={"op": "replace", "start": user_seq, "end": assistant_seq},
        sources=[start.seq, user_seq, assistant_seq],
    )
    source.append("compact/end", {"turn": 2})
    source.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    _message_turn(source, 3, "Recent retained question.", None)
    await host.sessions.flush(source)
    host.sessions.forget(source.id)
    assert host.sessions.get(source.id) is None
    header, events = host.store.read_events(source.id)
    assert header.cwd == CWD and header.created_at == 1
    surface = host.store.read_surface(source.id)
    assert surface is not None
    return events[-1].seq


class Refusing:
    """The mock model: it throws unless the last request message is [snapshot, delimiter, prompt]."""

    def __init__(self) -> None:
        self.seen: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> list[dict[str, Any]]:
        self.seen.append(request)
        last = request.messages[-1]
        content = last["content"]
        if last["role"] != "user" or len(content) != 3 or content[1].get("text") != DELIMITER:
            raise AssertionError(f"unexpected last request message: {last!r}")
        return text_response(REPLY)


def _step_starts(events: Any) -> list[int]:
    return [e.seq for e in events if e.type == "step/start"]


async def test_a_compacted_source_snapshot_reaches_the_model_through_the_agent_loop(
    host: Host, make_host: HostFactory
) -> None:
    source_last_seq = await _store_source(host)

    target = host.sessions.create(CWD, "target-session")
    model = Refusing()
    adapter = ScriptedAdapter([model])
    agent = Agent(host, target, provider="mock", model="mock", adapter=adapter)
    service = host.services.session_references
    try:
        parsed = service.parse_text(TYPED)
        assert parsed.text == DISPLAY
        assert [(r.session_id, r.label) for r in parsed.references] == [("source-session", "Source session")]
        prepared = await service.prepare(agent, [_text(parsed.text)], parsed.references)
        agent.send(prepared.content, contexts=prepared.contexts)
        await agent.wait_idle()
    finally:
        await agent.dispose()
        await host.sessions.flush(target)

    # One request, and it is the golden one.
    assert len(adapter.requests) == 1 and len(model.seen) == 1
    request = adapter.requests[0]
    assert [m["role"] for m in request.messages] == ["user"], "exactly one new user message"
    blocks = request.messages[-1]["content"]
    assert len(PREFIX.encode()) == 287 and len(SUFFIX.encode()) == 23
    assert blocks[0] == _text(GOLDEN_FULL_PROMPT.replace("{seq}", str(source_last_seq)))
    assert blocks[1] == _text(DELIMITER)
    assert blocks[2] == _text(DISPLAY)
    sent = json.dumps(request_json(request), ensure_ascii=False)
    for shadowed in SHADOWED:
        assert shadowed not in sent
    assert WARNING in sent and "Retained checkpoint." in sent and "Recent retained question." in sent

    # The durable log: the reply, one baked user/message with its envelope, no context/message.
    header, events = host.store.read_events("target-session")
    assert header.cwd == CWD
    turn_end = [e for e in events if e.type == "turn/end"]
    assert [e.data["reason"]["kind"] for e in turn_end] == ["completed"]
    assert [e.data["content"] for e in events if e.type == "assistant/message"] == [[_text(REPLY)]]
    users = [e for e in events if e.type == "user/message"]
    assert len(users) == 1
    assert not [e for e in events if e.type == "context/message"]
    stored = json.loads(users[0].to_line())["data"]
    assert stored["content"] == blocks
    assert stored["source"] == {"kind": "user"}
    assert stored["envelope"]["displayContent"] == [_text(DISPLAY)]
    (prefix,) = stored["envelope"]["prefixContexts"]
    assert prefix["source"] == REFERENCE_SOURCE
    assert prefix["meta"]["kind"] == "session-reference"
    (reference,) = prefix["meta"]["references"]
    assert reference["sessionId"] == "source-session"
    assert reference["label"] == "Source session"
    assert reference["compacted"] is True
    assert reference["capturedThroughSeq"] == source_last_seq
    log_text = "\n".join(e.to_line() for e in events)
    for shadowed in SHADOWED:
        assert shadowed not in log_text

    # The request the agent sent is the one the log rebuilds.
    (step_start,) = _step_starts(events)
    rebuilt = rebuild_request(events, step_start)
    assert rebuilt == request_json(request)
    lines_before = host.store.read_lines("target-session")

    # Later changes to the source never reach the target.
    await _mutate_compact_and_delete_source(host)

    assert host.store.read_lines("target-session") == lines_before
    _, after = host.store.read_events("target-session")
    assert rebuild_request(after, step_start) == rebuilt
    # A fresh host on the same data dir rebuilds the same request too.
    with make_host(data_dir=host.data_dir) as fresh:
        _, reread = fresh.store.read_events("target-session")
        assert rebuild_request(reread, step_start) == rebuilt
        assert not fresh.store.has("source-session")


async def _mutate_compact_and_delete_source(host: Host) -> None:
    source = await host.sessions.resume("source-session")
    turn = source.last_turn_number() + 1
    long_text = " ".join(f"{LATER} {i}" for i in range(150))
    _message_turn(source, turn, long_text, f"later reply {long_text}")
    await host.sessions.flush(source)
    agent = Agent.create(host, source, host.models.resolve("scripted"))
    try:
        result = await host.services.compact.compact_now(agent, retain_tokens=0)
    finally:
        await agent.dispose()
    assert result is not None, "the source was not compacted again"
    await host.sessions.flush(source)
    _, events = host.store.read_events("source-session")
    assert sum(1 for e in events if e.type == "compact/end") == 2
    host.sessions.forget("source-session")
    assert host.store.delete("source-session")
    assert not host.store.has("source-session")
