"""Tool-result pruning (keeping the head and tail of an oversized result) and where compaction runs it."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_compact.config import load_compact_config
from dsh_compact.errors import CompactionError
from dsh_compact.invariant import check_compactions
from dsh_compact.listeners import AutoCompaction
from dsh_compact.prune import PRUNE_MARKER, PruneConfig, ToolResultPruner, measure_content, prune_content
from dsh_compact.service import CompactionService
from dsh_host.errors import ConfigError
from dsh_host.log import check_log
from dsh_host.models.scripted import text_response, tool_call_response
from dsh_host.session.session import Session
from tests.dsh_compact.test_compact_agent_loop import ScriptedModels, converse
from tests.dsh_compact.test_compact_listeners import request_error

CALL = {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}
REASONING = {"type": "reasoning", "text": "r" * 500}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def test_the_marker_is_39_code_points() -> None:
    assert PRUNE_MARKER == "\n\n[... tool result middle pruned ...]\n\n"
    assert len(PRUNE_MARKER) == 39


def test_only_text_blocks_count_in_code_points() -> None:
    assert measure_content([text("a😀b")]) == 3
    assert measure_content([text("ab"), REASONING, CALL, text("c")]) == 3


def test_pruning_mixed_blocks_keeps_head_and_tail_text_and_every_other_block() -> None:
    blocks = [text("A" * 40), REASONING, text("B" * 30), CALL, text("C" * 30)]
    assert prune_content(blocks, PruneConfig(50, 4, 3)) == [text("AAAA" + PRUNE_MARKER), REASONING, CALL, text("CCC")]


def test_surrogate_pairs_are_never_split() -> None:
    [block] = prune_content([text("😀" * 60)], PruneConfig(50, 4, 3))
    assert block == text("😀" * 4 + PRUNE_MARKER + "😀" * 3)
    assert "\ufffd" not in block["text"]


def test_zero_head_and_tail_leave_the_marker_only() -> None:
    assert prune_content([text("x" * 100)], PruneConfig(39, 0, 0)) == [text(PRUNE_MARKER)]


def test_content_within_the_threshold_is_not_pruned() -> None:
    assert prune_content([text("x" * 50)], PruneConfig(50, 4, 3)) is None


def test_other_keys_of_a_text_block_are_kept() -> None:
    [block] = prune_content([{"type": "text", "text": "x" * 100, "cache": True}], PruneConfig(50, 4, 3))
    assert block == {"type": "text", "text": "xxxx" + PRUNE_MARKER + "xxx", "cache": True}


blocks_strategy = st.lists(
    st.one_of(
        st.builds(text, st.text(st.characters(blacklist_categories=()), max_size=40)),
        st.sampled_from([REASONING, CALL, {"type": "image", "url": "u"}]),
    ),
    max_size=6,
)


@st.composite
def configs(draw) -> PruneConfig:
    head, tail = draw(st.integers(0, 30)), draw(st.integers(0, 30))
    return PruneConfig(draw(st.integers(head + 39 + tail, head + 39 + tail + 60)), head, tail)


@given(blocks_strategy, configs())
def test_pruning_keeps_head_marker_tail_and_every_other_block(blocks, config) -> None:
    pruned = prune_content(blocks, config)
    joined = "".join(b["text"] for b in blocks if b.get("type") == "text")
    if len(joined) <= config.threshold_chars:
        assert pruned is None
        return
    assert pruned is not None
    pruned_text = "".join(b["text"] for b in pruned if b.get("type") == "text")
    assert pruned_text == joined[: config.head_chars] + PRUNE_MARKER + joined[len(joined) - config.tail_chars :]
    assert measure_content(pruned) == config.head_chars + 39 + config.tail_chars <= config.threshold_chars
    assert [b for b in pruned if b.get("type") != "text"] == [b for b in blocks if b.get("type") != "text"]
    assert all(b["text"] for b in pruned if b.get("type") == "text")
    assert prune_content(pruned, config) is None


# -- configuration ---------------------------------------------------------------------------


def test_pruning_is_on_by_default_and_can_be_turned_off() -> None:
    assert load_compact_config({}).prune == PruneConfig(8192, 4096, 1024)
    assert load_compact_config({"prune": {"enabled": False}}).prune is None


def test_a_missing_or_none_key_takes_its_default() -> None:
    config = load_compact_config({"prune": {"threshold_chars": 8192, "head_chars": None, "tail_chars": 7.0}})
    assert config.prune == PruneConfig(8192, 4096, 7)


@pytest.mark.parametrize(
    ("prune", "message"),
    [
        (1, "[plugins.compact] prune must be a table, got 1"),
        ({"headChars": 1}, "[plugins.compact.prune] unknown key 'headChars'"),
        ({"threshold_chars": 0}, "[plugins.compact.prune] threshold_chars must be an integer >= 1, got 0"),
        ({"threshold_chars": 1.5}, "[plugins.compact.prune] threshold_chars must be an integer >= 1, got 1.5"),
        ({"head_chars": -1}, "[plugins.compact.prune] head_chars must be an integer >= 0, got -1"),
        ({"tail_chars": True}, "[plugins.compact.prune] tail_chars must be an integer >= 0, got true"),
        ({"enabled": "yes"}, '[plugins.compact.prune] enabled must be true or false, got "yes"'),
        (
            {"threshold_chars": 50, "head_chars": 20, "tail_chars": 20},
            "[plugins.compact.prune] head_chars + marker + tail_chars (79) must be at most threshold_chars (50)",
        ),
    ],
)
def test_bad_values_name_the_table_key_and_value(prune, message) -> None:
    with pytest.raises(ConfigError) as info:
        load_compact_config({"prune": prune})
    assert str(info.value).startswith(message)


def test_the_fit_check_comes_after_each_key() -> None:
    with pytest.raises(ConfigError, match="tail_chars must be"):
        load_compact_config({"prune": {"threshold_chars": 1, "tail_chars": -1}})


# -- prune_session ---------------------------------------------------------------------------

BIG = "head " + "m" * 2000 + " tail"


def tool_session(fx, big: str = BIG, *, open_turn: bool = True, **extra) -> Session:
    """Turn 1: a prompt, a step with one tool call whose result is `big`, an answer; turn 2 open."""
    session = fx.new_session()
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    fx.user(session, "read it")
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("request/header", fx.header_data())
    fx.assistant(session, 1, 1, [CALL])
    call = session.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}"})
    data = {"turn": 1, "step": 1, "callId": "c1", "content": [text(big)], "isError": False, **extra}
    session.append("tool/result", data, surface_op="append", sources=[call.seq])
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    fx.assistant(session, 1, 2, [text("it says hello")])
    session.append("step/end", {"turn": 1, "step": 2})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    if open_turn:
        session.append("turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    return session


def test_prune_session_replaces_each_oversized_result_keeping_its_data(fx) -> None:
    session = tool_session(fx, isError=True, error={"name": "E", "code": "X"}, meta={"k": 1}, later="kept")
    result = ToolResultPruner(PruneConfig(100, 20, 20)).prune_session(session)
    [pruned] = result.pruned
    original, replacement = session.event(pruned.original_seq), session.event(pruned.replacement_seq)
    assert (pruned.original_seq, pruned.replacement_seq, pruned.call_id) == (6, 13, "c1")
    assert (pruned.chars_before, pruned.chars_after, result.chars_removed) == (2010, 79, 2010 - 79)
    assert replacement.surface_op == {"op": "replace", "start": 6, "end": 6}
    assert replacement.source_event_seqs == [6]
    assert {**replacement.data, "content": None} == {**original.data, "content": None}
    assert list(replacement.data) == list(original.data)
    assert replacement.data["content"] == [text(BIG[:20] + PRUNE_MARKER + BIG[-20:])]
    assert session.surface.nodes == [1, 4, 13, 9] and session.surface.replace_generation == 1
    assert check_log(session.header, session.events, [check_compactions]) == ()


def test_a_second_pass_prunes_nothing(fx) -> None:
    session = tool_session(fx)
    pruner = ToolResultPruner(PruneConfig(100, 20, 20))
    pruner.prune_session(session)
    again = pruner.prune_session(session)
    assert (again.pruned, again.chars_removed) == ((), 0)


def test_replay_gives_the_same_messages_and_generation(fx) -> None:
    session = tool_session(fx)
    ToolResultPruner(PruneConfig(100, 20, 20)).prune_session(session)
    replayed = Session(session.header, session.events)
    assert replayed.derive_messages() == session.derive_messages()
    assert replayed.surface.replace_generation == session.surface.replace_generation == 1


# -- in compaction ---------------------------------------------------------------------------


def service_for(summarizer, *, prune: dict | None = None, window: int = 1000) -> CompactionService:
    table = {"threshold_ratio": 0.5, "retain_tokens": 180}
    config = load_compact_config(
        {**table, "prune": prune or {"threshold_chars": 100, "head_chars": 20, "tail_chars": 20}}
    )
    pruner = ToolResultPruner(config.prune) if config.prune is not None else None
    return CompactionService(config, summarizer=summarizer, capacity=lambda target: window, pruner=pruner)


async def test_below_pressure_nothing_is_pruned(fx) -> None:
    session = tool_session(fx)
    stub = fx.StubSummarizer()
    assert await service_for(stub, window=100_000).compact_if_needed(session, "pressure", None) is None
    assert session.surface.replace_generation == 0 and stub.calls == []


async def test_a_prune_that_clears_the_pressure_needs_no_summary(fx) -> None:
    session = tool_session(fx)
    stub = fx.StubSummarizer()
    assert await service_for(stub).compact_if_needed(session, "pressure", None) is None
    assert session.surface.replace_generation == 1 and stub.calls == []
    assert [e.type for e in session.events[-1:]] == ["tool/result"]


async def test_when_pruning_is_not_enough_the_summary_reads_the_pruned_result(fx) -> None:
    session = tool_session(fx)
    for turn in range(2, 6):
        if turn > 2:
            session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        fx.user(session, fx.padded(f"fixture user {turn}", fx.USER_LENGTH))
        session.append("step/start", {"turn": turn, "step": 1})
        fx.assistant(session, turn, 1, [text(fx.padded(f"fixture assistant {turn}", fx.ASSISTANT_LENGTH))])
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 6, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    stub = fx.StubSummarizer()
    result = await service_for(stub).compact_if_needed(session, "pressure", None)
    assert result is not None
    [(request, _, _)] = stub.calls
    summarized = repr(request.messages)
    assert "tool result middle pruned" in summarized and "m" * 100 not in summarized
    kinds = [e.type for e in session.events if e.type in ("tool/result", "compact/start")]
    assert kinds == ["tool/result", "tool/result", "compact/start"]
    assert check_log(session.header, session.events, [check_compactions]) == ()


async def test_without_the_pruner_the_result_is_unchanged(fx) -> None:
    session = tool_session(fx)
    stub = fx.StubSummarizer()
    with pytest.raises(CompactionError, match="summary is not smaller"):  # nothing else to shadow
        await service_for(stub, prune={"enabled": False}).compact_if_needed(session, "pressure", None)
    assert session.surface.replace_generation == 0
    assert all(BIG in repr(e.data) for e in session.events if e.type == "tool/result")


async def test_after_an_overflow_the_prune_stays_when_the_summary_fails(fx) -> None:
    session = tool_session(fx)
    stub = fx.StubSummarizer(error=RuntimeError("summary unavailable"))
    with pytest.raises(RuntimeError, match="summary unavailable"):
        await service_for(stub).compact_if_needed(session, "context-overflow", None)
    kinds = [e.type for e in session.events[13:]]
    assert kinds == ["tool/result", "compact/start", "compact/end"]
    assert session.surface.replace_generation == 1
    assert session.events[-1].data["error"] == "summary unavailable"
    assert check_log(session.header, session.events, [check_compactions]) == ()


async def test_the_plugin_prunes_with_its_configuration(make_host) -> None:
    prune = {"threshold_chars": 100, "head_chars": 20, "tail_chars": 20}
    with make_host(["compact"], compact={"prune": prune}) as host:
        assert host.services.compact.pruner.config == PruneConfig(100, 20, 20)
    with make_host(["compact"], compact={"prune": {"enabled": False}}) as host:
        assert host.services.compact.pruner is None


async def test_in_the_agent_loop_a_prune_relieves_the_pressure_before_the_step_ends(make_host) -> None:
    models = ScriptedModels([tool_call_response("c1", "probe", {}), text_response("done")], "NO", window=1000)
    prune = {"threshold_chars": 100, "head_chars": 20, "tail_chars": 20}
    with make_host(["compact"], compact={"threshold_ratio": 0.5, "retain_tokens": 180, "prune": prune}) as host:
        session = await converse(host, models, ["first " + "f" * 1494])
    kinds = [e.type for e in session.events]
    assert "compact/start" not in kinds and models.summary_requests == []
    # The result, its pruned replacement, then the step closes; the next request sees the prune.
    result = kinds.index("tool/result")
    assert kinds[result : result + 3] == ["tool/result", "tool/result", "step/end"]
    assert json.dumps(PRUNE_MARKER)[1:-1] in json.dumps(models.conversation_requests[-1].messages)
    # The stored log is checked at teardown too (tests/log_check.py).
    assert check_log(session.header, session.events, [check_compactions]) == ()


async def test_overflow_recovery_retries_from_a_landed_prune_when_the_summary_fails(fx, caplog) -> None:
    session = tool_session(fx)
    listener = AutoCompaction(service_for(fx.StubSummarizer(error=RuntimeError("summary unavailable"))))
    with caplog.at_level(logging.WARNING, logger="dsh.compact"):
        assert await request_error(listener, session) == "retry"
    assert [e.type for e in session.events].count("tool/result") == 2
    assert session.events[-1].data == {"turn": 2, "error": "summary unavailable"}
    assert "retrying from the replacement surface" in caplog.text
