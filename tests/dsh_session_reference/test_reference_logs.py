"""Every log the reference implementation wrote can be referenced, and its snapshot holds exactly
the user, steering and assistant text of its current surface.

The expected conversation is computed here from the host's surface fold and the projection
rules written out afresh (direct human prompts and compaction checkpoints by display content,
assistant text, non-empty joined text only), not by calling the projection module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_host import DshError
from dsh_host.host import Host
from dsh_host.session.check import resume_refusal
from dsh_host.session.events import Event
from dsh_host.session.jsonl import ParsedLog, read_log_file
from dsh_host.session.surface import fold
from dsh_session_reference import SessionReferenceService, tag_safe_json
from tests.dsh_session_reference.conftest import MakeHost

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs

PREFIX_END = "<referenced-sessions>\n"
SUFFIX = "\n</referenced-sessions>"


def test_the_reference_logs_are_there(reference_logs: list[Path]) -> None:
    assert len(reference_logs) >= 50


@pytest.fixture
def host(make_host: MakeHost) -> Host:
    return make_host()


def joined_text(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def shown_content(data: Mapping[str, Any]) -> Any:
    envelope = data.get("envelope")
    if isinstance(envelope, Mapping) and envelope.get("displayContent") is not None:
        return envelope["displayContent"]
    return data.get("content")


def expected_conversation(events: list[Event]) -> list[dict[str, str]]:
    conversation = []
    for seq in fold(events).nodes:
        event = events[seq]
        data = event.data
        source = data.get("source") if isinstance(data, Mapping) else None
        kind = source.get("kind") if isinstance(source, Mapping) else None
        plugin = source.get("plugin") if isinstance(source, Mapping) else None
        human = kind == "user"
        checkpoint = event.type == "user/message" and (kind, plugin) == ("plugin", "compact")
        if event.type == "assistant/message":
            role, content = "assistant", data.get("content")
        elif event.type in ("user/message", "steering/message") and (human or checkpoint):
            role, content = "user", shown_content(data)
        else:
            continue
        text = joined_text(content)
        if text:
            conversation.append({"role": role, "text": text})
    return conversation


def import_log(host: Host, path: Path) -> ParsedLog:
    parsed = read_log_file(path)
    host.store.import_log(parsed.header, parsed.events)
    return parsed


def data_of(prompt: str) -> list[dict[str, Any]]:
    start = prompt.index(PREFIX_END) + len(PREFIX_END)
    assert prompt.endswith(SUFFIX)
    assert prompt.count("<referenced-sessions>") == 1 and prompt.count("</referenced-sessions>") == 1
    return json.loads(prompt[start : -len(SUFFIX)])


async def test_reference_log_snapshot_holds_its_surface_text(host: Host, reference_log: Path) -> None:
    parsed = import_log(host, reference_log)
    target = host.sessions.create("/target", "reference-log-target")
    label = f"log {reference_log.stem}"
    expected = expected_conversation(parsed.events)
    service: SessionReferenceService = host.services.session_references

    prepared = await service.prepare(
        target, [{"type": "text", "text": f"see @{label}"}], [{"sessionId": parsed.header.id, "label": label}]
    )

    [context] = prepared.contexts
    [source] = data_of(context["content"][0]["text"])
    assert source["sessionId"] == parsed.header.id
    assert source["label"] == label
    assert source["cwd"] == parsed.header.cwd
    assert source["capturedThroughSeq"] == (parsed.events[-1].seq if parsed.events else None)
    assert len(tag_safe_json(source).encode("utf-8")) <= service.max_reference_bytes
    [meta] = context["meta"]["references"]
    assert meta["originalMessages"] == len(expected)
    assert meta["compacted"] is any(events_source_is_compact(parsed.events[seq]) for seq in fold(parsed.events).nodes)
    # None of these logs is large enough to need cutting under the default budget.
    assert meta["truncated"] is False
    assert source["conversation"] == expected

    # Resumed, the session is answered from memory: the same projection of its (possibly
    # repaired: resuming closes a turn a crash left open) log. A log from before provider
    # routing cannot be resumed: it is referenced from the store only.
    if resume_refusal(parsed.header, parsed.events) is not None:
        with pytest.raises(DshError, match="cannot be resumed"):
            await host.sessions.resume(parsed.header.id)
        return
    live = await host.sessions.resume(parsed.header.id)
    again = await service.prepare(
        target, [{"type": "text", "text": f"see @{label}"}], [{"sessionId": parsed.header.id, "label": label}]
    )
    [live_source] = data_of(again.contexts[0]["content"][0]["text"])
    assert live_source["capturedThroughSeq"] == (live.seq - 1 if live.seq else None)
    assert live_source["conversation"] == expected_conversation(list(live.events))


def events_source_is_compact(event: Event) -> bool:
    source = event.data.get("source") if isinstance(event.data, Mapping) else None
    return (
        event.type == "user/message"
        and isinstance(source, Mapping)
        and (source.get("kind"), source.get("plugin")) == ("plugin", "compact")
    )


async def test_three_reference_logs_in_one_message(host: Host, reference_logs: list[Path]) -> None:
    paths = [p for p in reference_logs if p.stem.startswith("ref-acp-agent-advanced-toolchain-session")]
    assert len(paths) == 3
    parsed = [import_log(host, path) for path in paths]
    target = host.sessions.create("/target", "reference-log-target")
    refs = [{"sessionId": log.header.id} for log in parsed]

    prepared = await host.services.session_references.prepare(target, [{"type": "text", "text": "x"}], refs)

    data = data_of(prepared.contexts[0]["content"][0]["text"])
    assert [d["sessionId"] for d in data] == [log.header.id for log in parsed]
    assert [d["conversation"] for d in data] == [expected_conversation(log.events) for log in parsed]
    assert [m["inputIndex"] for m in prepared.contexts[0]["meta"]["references"]] == [0, 1, 2]
