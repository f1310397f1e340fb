"""The token meter: block and message prices (UTF-16 lengths), headers, and usage anchors."""

from __future__ import annotations

import json

import pytest

from dsh_compact.meter import (
    TokenMeter,
    estimate_block,
    estimate_header,
    estimate_message,
    js_length,
)
from dsh_compact.summarizer import frame


def text(value: str) -> dict:
    return {"type": "text", "text": value}


@pytest.mark.parametrize(
    ("value", "length"),
    [("", 0), ("abc", 3), ("é", 1), ("😀", 2), ("a😀b", 4), ("\ud800", 1), ("€" * 3, 3)],
)
def test_js_length_counts_utf16_code_units(value: str, length: int) -> None:
    assert js_length(value) == length


@pytest.mark.parametrize(
    ("block", "tokens"),
    [
        (text(""), 4),
        (text("abcd"), 5),
        (text("abcde"), 6),
        (text("😀😀"), 5),  # 4 code units
        (text("😀😀a"), 6),  # 5 code units
        ({"type": "reasoning", "text": "x" * 9}, 7),
        ({"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"a":1}'}, 1 + 2 + 4),
        (
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "content": [text("abcd"), text("")],
                "isError": False,
            },
            13,
        ),
        ({"type": "image", "data": "é"}, 4 + 7),  # {"type":"image","data":"é"} is 27 code units
    ],
)
def test_block_prices(block: dict, tokens: int) -> None:
    assert estimate_block(block) == tokens


def test_message_and_header_prices() -> None:
    assert estimate_message({"role": "user", "content": [text("x" * 326)]}) == 90
    assert estimate_message({"role": "assistant", "content": [text("x" * 331)]}) == 91
    assert estimate_message({"role": "user", "content": []}) == 4
    tools = [{"name": "read", "description": "d", "parameters": {}}]
    header = {
        "config": {"provider": "p", "model": "m"},
        "system": "s" * 10,
        "tools": tools,
        "messagePrefix": [{"role": "user", "content": [text("abcd")]}],
    }
    tools_json = json.dumps(tools, separators=(",", ":"))
    assert estimate_header(header) == 9 + (3 + 4) + (-(-len(tools_json) // 4) + 4)
    assert estimate_header({"config": {"provider": "p", "model": "m"}}) == 0
    assert estimate_header(None) == 0


def test_framing_costs_98_tokens_plus_the_summary() -> None:
    assert estimate_message({"role": "user", "content": frame([])}) == 98
    assert estimate_message({"role": "user", "content": frame([text("small checkpoint")])}) == 106


def test_measure_prices_the_surface_of_the_fixture(fx) -> None:
    session = fx.conversation(4)
    measurement = TokenMeter().measure(session)
    assert [n.seq for n in measurement.nodes] == [1, 4, 8, 10, 14, 16, 20, 22]
    assert [n.tokens for n in measurement.nodes] == [90, 91] * 4
    assert measurement.surface_tokens == measurement.total_tokens == 724
    assert measurement.header_tokens == 0


def test_measure_follows_appends_and_replacements_incrementally(fx) -> None:
    session = fx.conversation(1)
    meter = TokenMeter()
    assert meter.measure(session).total_tokens == 181
    extra = fx.user(session, "abcd")
    assert meter.measure(session).nodes[-1].seq == extra
    assert meter.measure(session).total_tokens == 181 + 9
    session.append(
        "user/message",
        {"content": [text("x")], "source": {"kind": "user"}},
        surface_op={"op": "replace", "start": 1, "end": 4},
        sources=[1, 4],
    )
    measurement = meter.measure(session)
    assert [n.seq for n in measurement.nodes] == [9, extra]
    assert measurement.total_tokens == 9 + 9
    assert TokenMeter().measure(session) == measurement


def test_the_header_price_counts_toward_the_total(fx) -> None:
    session = fx.conversation(1, header=fx.header_data(system="s" * 40))
    measurement = TokenMeter().measure(session)
    assert measurement.header_tokens == 14
    assert measurement.total_tokens == 181 + 14


def _usage_turn(fx, session, usage: dict) -> None:
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    fx.user(session, "x" * 400)  # 100 + 8 = 108 tokens
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("request/header", fx.header_data())
    chunk = session.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0, "block": text("y" * 40)}},
    )
    session.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "content": [text("y" * 40)],
            "provenance": {"provider": "M", "model": "M"},
            "usage": usage,
        },
        surface_op="append",
        sources=[chunk.seq],
    )


def test_usage_above_the_heuristic_becomes_the_baseline(fx) -> None:
    session = fx.new_session()
    _usage_turn(fx, session, {"inputTokens": 500, "outputTokens": 20, "cacheReadTokens": 100})
    meter = TokenMeter()
    assert meter.measure(session).surface_tokens == 108 + 18
    assert meter.measure(session).total_tokens == 620
    fx.user(session, "z" * 8)  # the surface grows by 10: the estimate follows from the anchor
    assert meter.measure(session).total_tokens == 630


def test_usage_below_the_heuristic_is_ignored(fx) -> None:
    session = fx.new_session()
    _usage_turn(fx, session, {"inputTokens": 5, "outputTokens": 1})
    assert TokenMeter().measure(session).total_tokens == 126


def test_a_changed_header_drops_the_anchor(fx) -> None:
    session = fx.new_session()
    _usage_turn(fx, session, {"inputTokens": 500, "outputTokens": 20})
    session.append("request/header", fx.header_data(system="s" * 4))
    measurement = TokenMeter().measure(session)
    assert measurement.total_tokens == measurement.surface_tokens + 5


def test_usage_prices_the_message_as_its_chunks_assemble(fx) -> None:
    session = fx.new_session()
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("request/header", fx.header_data())
    chunks = [
        session.append(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0, "block": text("r" * 400)}},
        ).seq
    ]
    # The logged message lost the long text (a rewrite); usage pays for what was streamed.
    session.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "content": [text("ok")],
            "provenance": {"provider": "M", "model": "M"},
            "usage": {"inputTokens": 0, "outputTokens": 0},
        },
        surface_op="append",
        sources=chunks,
    )
    measurement = TokenMeter().measure(session)
    assert measurement.surface_tokens == 9
    # baseline = estimate = 0 + 108 (the streamed text); now = baseline + (9 - 108)
    assert measurement.total_tokens == 9
