"""End to end: one message of a dsh session @-mentions a Claude Code session, a Codex session and a
dsh session; the model request carries the three snapshots in the one frame a reference uses,
the two other agents' sessions shaped exactly as the dsh session's."""

from __future__ import annotations

import json
from typing import Any

from dsh_host import Agent
from dsh_host.models.base import ModelRequest
from dsh_host.models.scripted import ScriptedAdapter, text_response
from dsh_session_reference import format_mention
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.e2e.e2e_support import DELIMITER, PREFIX, REFERENCE_SOURCE, SUFFIX

CWD = "/work/project"


def _text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def claude_session(base) -> str:
    t = ClaudeTranscript(cwd=CWD)
    t.user("old question")
    t.reply(("text", "old answer"))
    t.compact("We chose JSON lines.")
    t.user("how are cut lines handled?")
    fork = t.head
    t.reply(("thinking", "private"), ("text", "They are skipped"), ("tool_use", "toolu_1"))
    t.tool_result("toolu_1", "tool output that stays out")
    t.reply(("text", "and counted."))
    t.rewind(fork)  # an edited reply branch written later wins
    t.reply(("text", "Skipped and counted."))
    t.write(base)
    return f"claude-code:{t.session_id}"


def codex_session(base) -> str:
    r = CodexRollout(cwd=CWD)
    r.meta()
    r.context()
    r.turn_context()
    r.user("rename the module")
    r.assistant("Looking at imports first.", phase="commentary")
    r.tool_call()
    r.assistant("Renamed.")
    r.write(base)
    return f"codex:{r.session_id}"


async def test_a_message_mentions_another_agents_sessions_as_it_would_a_dsh_session(source_host, agent_dirs):
    host = source_host("session-reference", "compact")
    claude_id, codex_id = claude_session(agent_dirs.claude), codex_session(agent_dirs.codex)
    dsh_source = host.sessions.create(CWD, "dsh-source", created_at=1)
    dsh_source.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    dsh_source.append(
        "user/message", {"content": [_text("rename the module")], "source": {"kind": "user"}}, surface_op="append"
    )
    dsh_source.append("step/start", {"turn": 1, "step": 1})
    for reply in ("Looking at imports first.", "Renamed."):
        data = {"turn": 1, "step": 1, "content": [_text(reply)], "provenance": {"provider": "x", "model": "y"}}
        dsh_source.append("assistant/message", data, surface_op="append")
    dsh_source.append("step/end", {"turn": 1, "step": 1})
    dsh_source.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await host.sessions.flush(dsh_source)
    host.sessions.forget("dsh-source")

    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> list[dict[str, Any]]:
        seen.append(request)
        return text_response("Noted.")

    target = host.sessions.create(CWD, "target")
    agent = Agent(host, target, provider="mock", model="mock", adapter=ScriptedAdapter([model]))
    service = host.services.session_references
    typed = (
        f"compare {format_mention(claude_id, 'Claude chat')} and {format_mention(codex_id, 'Codex chat')} "
        f"with {format_mention('dsh-source', 'dsh chat')}"
    )
    try:
        parsed = service.parse_text(typed)
        prepared = await service.prepare(agent, [_text(parsed.text)], parsed.references)
        agent.send(prepared.content, contexts=prepared.contexts)
        await agent.wait_idle()
    finally:
        await agent.dispose()
        await host.sessions.flush(target)

    (request,) = seen
    context, delimiter, prompt = request.messages[-1]["content"]
    assert (delimiter, prompt) == (_text(DELIMITER), _text("compare @Claude chat and @Codex chat with @dsh chat"))
    text = context["text"]
    assert text.startswith(PREFIX) and text.endswith(SUFFIX) and text.count("</referenced-sessions>") == 1
    claude, codex, dsh = json.loads(text[len(PREFIX) : -len(SUFFIX)])
    assert (
        list(claude) == list(codex) == list(dsh) == ["sessionId", "label", "cwd", "capturedThroughSeq", "conversation"]
    )
    assert claude["conversation"] == [
        {"role": "user", "text": claude["conversation"][0]["text"]},
        {"role": "user", "text": "how are cut lines handled?"},
        {"role": "assistant", "text": "Skipped and counted."},
    ]
    assert "We chose JSON lines." in claude["conversation"][0]["text"]
    assert (claude["sessionId"], claude["label"], claude["cwd"], claude["capturedThroughSeq"]) == (
        claude_id,
        "Claude chat",
        CWD,
        2,
    )
    assert codex["conversation"] == dsh["conversation"]  # the same conversation, the same snapshot
    assert (codex["sessionId"], codex["label"], codex["cwd"], codex["capturedThroughSeq"]) == (
        codex_id,
        "Codex chat",
        CWD,
        2,
    )
    sent = json.dumps(request.messages, ensure_ascii=False)
    for hidden in ("old question", "private", "tool output that stays out", "They are skipped", "AGENTS.md", "total 0"):
        assert hidden not in sent

    (user,) = [e for e in host.store.read_events("target")[1] if e.type == "user/message"]
    (prefix,) = user.data["envelope"]["prefixContexts"]
    assert prefix["source"] == REFERENCE_SOURCE
    references = prefix["meta"]["references"]
    assert [(r["sessionId"], r["compacted"]) for r in references] == [
        (claude_id, True),
        (codex_id, False),
        ("dsh-source", False),
    ]
