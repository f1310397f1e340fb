"""The default summarizer: constants, framing, target choice, the call, and its failures."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from dsh_compact.config import load_compact_config
from dsh_compact.errors import CompactionError, SummarizationError
from dsh_compact.scripted_reply import scripted_reply
from dsh_compact.service import CompactionService
from dsh_compact.summarizer import (
    CHECKPOINT_PREAMBLE,
    COMPACTION_INSTRUCTION,
    PURPOSE,
    ModelSummarizer,
    SummarizationInput,
    frame,
    js_trim,
)
from dsh_compact.targets import CompactAgent, ModelTarget
from dsh_host.models.base import ModelFailure
from dsh_host.models.registry import ResolvedModel
from dsh_host.models.scripted import (
    ScriptedAdapter,
    error_finish_response,
    max_tokens_response,
    text_response,
)


def blocks_response(blocks: list[dict], finish: str = "stop") -> list[dict]:
    chunks: list[dict] = []
    for index, block in enumerate(blocks):
        chunks += [
            {"type": "block-start", "index": index, "blockType": block["type"]},
            {"type": "block-end", "index": index, "block": block},
        ]
    return [*chunks, {"type": "finish", "reason": {"kind": finish}}]


class Models:
    """A resolver over one scripted adapter; `reroute` changes the pair actually dispatched."""

    def __init__(self, script: list, reroute: ModelTarget | None = None) -> None:
        self.adapter = ScriptedAdapter(script)
        self.reroute = reroute
        self.resolved: list[ModelTarget] = []

    def __call__(self, target: ModelTarget) -> ResolvedModel:
        self.resolved.append(target)
        final = self.reroute or target
        return ResolvedModel(final.provider, final.model, self.adapter)


def summarizer(models: Models, **table) -> ModelSummarizer:
    return ModelSummarizer(load_compact_config(table), models)


INPUT = SummarizationInput(messages=({"role": "user", "content": [{"type": "text", "text": "old"}]},))


def test_constants_are_exact() -> None:
    assert len(COMPACTION_INSTRUCTION) == 1728
    assert hashlib.sha256(COMPACTION_INSTRUCTION.encode()).hexdigest() == (
        "1210e4763d87f86e2b0a0c2f67683f1db0780ffed2be1cd1c202334f0816669d"
    )
    assert [c for c in COMPACTION_INSTRUCTION if not c.isascii()] == ["—"]
    assert "acting as a compaction engine" in COMPACTION_INSTRUCTION
    assert not COMPACTION_INSTRUCTION.endswith("\n")
    assert len(CHECKPOINT_PREAMBLE) == 300
    assert hashlib.sha256(CHECKPOINT_PREAMBLE.encode()).hexdigest() == (
        "306ffa304ad5eee1b9a19a5744b7bf665eac77c4fd154ad3eed572987a534da1"
    )


def test_frame_is_three_or_more_blocks() -> None:
    summary = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    framed = frame(summary)
    assert len(framed[0]["text"]) == 321
    assert framed[0]["text"].endswith("\n\n<compacted-summary>")
    assert framed[1:3] == summary
    assert framed[-1] == {"type": "text", "text": "</compacted-summary>"}


@pytest.mark.parametrize(
    ("value", "trimmed"),
    [
        (" \t\n\r\v\f", ""),
        ("\u00a0\u2028\u2029\ufeff\u3000\u2000\u200a\u202f\u205f\u1680", ""),
        ("\x1c\x1d\x1e\x1f", "\x1c\x1d\x1e\x1f"),  # Python's strip() would drop these
        ("\x85", "\x85"),
        ("\u200b", "\u200b"),  # zero-width space is not whitespace to JavaScript
        ("  a b  ", "a b"),
    ],
)
def test_js_trim(value: str, trimmed: str) -> None:
    assert js_trim(value) == trimmed


async def test_the_call_keeps_only_text_blocks(fx) -> None:
    reply = [
        {"type": "reasoning", "text": "thinking"},
        {"type": "text", "text": "public summary"},
        {"type": "tool-call", "id": "c", "name": "read", "arguments": "{}"},
    ]
    models = Models([blocks_response(reply)])
    session = fx.conversation(1)
    signal = asyncio.Event()
    summary = await summarizer(models, max_tokens=321).summarize(INPUT, CompactAgent(session), signal)
    assert summary.blocks == ({"type": "text", "text": "public summary"},)
    assert (summary.provider, summary.model, summary.max_tokens) == ("M", "M", 321)
    (request,) = models.adapter.requests
    assert (request.provider, request.model, request.max_tokens) == ("M", "M", 321)
    assert request.signal is signal
    assert request.session_id == session.id
    assert request.purpose == "compaction"
    assert request.system is None and request.tools is None
    assert request.messages[0] == INPUT.messages[0]
    assert request.messages[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": COMPACTION_INSTRUCTION}],
    }
    assert "## Primary Request and Intent" in request.messages[-1]["content"][0]["text"]


async def test_system_and_tools_are_replayed(fx) -> None:
    models = Models([text_response("ok summary")])
    tools = ({"name": "read", "description": "d", "parameters": {}},)
    request_input = SummarizationInput(messages=INPUT.messages, system="sys", tools=tools)
    await summarizer(models).summarize(request_input, CompactAgent(fx.conversation(1)), None)
    (request,) = models.adapter.requests
    assert request.system == "sys"
    assert list(request.tools) == list(tools)


async def test_a_policy_supplies_the_summarization_model(fx) -> None:
    models = Models([text_response("ok summary")])
    table = {
        "model_policies": [
            {
                "provider": "M",
                "model": "M",
                "summarization_provider": "cheap",
                "summarization_model": "mini",
                "max_tokens": 222,
            }
        ]
    }
    summary = await summarizer(models, **table).summarize(INPUT, CompactAgent(fx.conversation(1)), None)
    assert models.resolved == [ModelTarget("cheap", "mini")]
    assert (summary.provider, summary.model, summary.max_tokens) == ("cheap", "mini", 222)
    assert models.adapter.requests[0].messages[0] == INPUT.messages[0]


async def test_the_routed_header_wins_over_the_agent_model(fx) -> None:
    models = Models([text_response("ok summary")])
    session = fx.conversation(1, header=fx.header_data("routed", "r1"))
    agent = CompactAgent(session, ModelTarget("fallback", "f1"))
    await summarizer(models).summarize(INPUT, agent, None)
    assert models.resolved == [ModelTarget("routed", "r1")]


async def test_the_agent_model_is_the_last_resort(fx) -> None:
    models = Models([text_response("ok summary")])
    session = fx.new_session()
    await summarizer(models).summarize(INPUT, CompactAgent(session, ModelTarget("fallback", "f1")), None)
    assert models.resolved == [ModelTarget("fallback", "f1")]


async def test_no_target_at_all(fx) -> None:
    models = Models([])
    with pytest.raises(SummarizationError, match="no provider/model available for summarization"):
        await summarizer(models).summarize(INPUT, CompactAgent(fx.new_session()), None)


async def test_the_dispatched_pair_is_recorded(fx) -> None:
    models = Models([text_response("small")], reroute=ModelTarget("routed-summary-provider", "x"))
    session = fx.conversation(3)
    service = CompactionService(load_compact_config({}), summarizer=summarizer(models), capacity=lambda target: None)
    result = await service.compact_region(session, 1, 10)
    data = session.event(result.summary_seq).data
    assert (data["provider"], data["model"], data["maxTokens"]) == ("routed-summary-provider", "x", 8192)


@pytest.mark.parametrize(
    ("script", "message", "code"),
    [
        (error_finish_response("provider exploded", "PROVIDER"), "provider exploded", "PROVIDER"),
        (
            [
                {
                    "type": "finish",
                    "reason": {"kind": "aborted", "failure": {"message": "stop", "code": "ABORTED"}},
                }
            ],
            "stop",
            "ABORTED",
        ),
        (
            max_tokens_response("cut"),
            "summarization truncated at the token cap (incomplete checkpoint)",
            "MAX_TOKENS",
        ),
        (blocks_response([{"type": "reasoning", "text": "only thinking"}]), "no text summary content", None),
        (text_response(" \n\u00a0\ufeff\u2028"), "summarization produced no text summary content", None),
        (blocks_response([]), "no text summary content", None),
    ],
)
async def test_failures(fx, script: list, message: str, code: str | None) -> None:
    models = Models([script])
    with pytest.raises(SummarizationError) as info:
        await summarizer(models).summarize(INPUT, CompactAgent(fx.conversation(1)), None)
    assert message in str(info.value)
    assert info.value.code == code


async def test_a_failed_summary_writes_only_start_and_end(fx) -> None:
    session = fx.conversation(2)
    before = session.seq
    models = Models([max_tokens_response("a summary cut short")])
    service = CompactionService(load_compact_config({}), summarizer=summarizer(models), capacity=lambda t: None)
    with pytest.raises(SummarizationError) as info:
        await service.compact_region(session, 1, 4)
    assert info.value.code == "MAX_TOKENS"
    assert [e.type for e in session.events[before:]] == ["compact/start", "compact/end"]
    assert session.events[-1].data["error"] == "summarization truncated at the token cap (incomplete checkpoint)"


async def test_an_adapter_failure_propagates_through_the_transaction(fx) -> None:
    def fail(request):
        raise ModelFailure("rate limited", "RATE_LIMIT")

    session = fx.conversation(2)
    service = CompactionService(load_compact_config({}), summarizer=summarizer(Models([fail])), capacity=lambda t: None)
    with pytest.raises(ModelFailure, match="rate limited"):
        await service.compact_region(session, 1, 4)
    assert session.events[-1].data == {"turn": 3, "error": "rate limited"}


async def test_the_scripted_plain_mode_summary_is_smaller(fx) -> None:
    session = fx.conversation(4)
    models = Models([])
    # Plain mode answers compaction requests with the plugin's checkpoint (its dsh_scripted_reply).
    models.adapter = ScriptedAdapter(plugin_reply=lambda request: scripted_reply(request, PURPOSE))
    service = CompactionService(load_compact_config({}), summarizer=summarizer(models), capacity=lambda t: None)
    result = await service.compact_region(session, 1, 16)
    assert "## Primary Request and Intent" in result.summary[0]["text"]
    assert session.surface.nodes == [result.checkpoint_seq, 20, 22]


async def test_a_not_smaller_model_summary_is_refused(fx) -> None:
    session = fx.conversation(1)
    models = Models([text_response("y" * 2000)])
    service = CompactionService(load_compact_config({}), summarizer=summarizer(models), capacity=lambda t: None)
    with pytest.raises(CompactionError, match="summary is not smaller than the shadowed content"):
        await service.compact_region(session, 1, 1)
