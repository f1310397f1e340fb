"""Tool-pairing balance of surface cuts: a cut may not separate a tool call from its result."""

from __future__ import annotations

import pytest

from dsh_compact.pairing import ToolPairingError, balanced_after, balanced_before, balanced_cuts

CALL = {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}
CALL2 = {"type": "tool-call", "id": "c2", "name": "read", "arguments": "{}"}


def before_after(session, seq: int) -> tuple[bool, bool]:
    return balanced_before(session, seq), balanced_after(session, seq)


def context(session, value: str = "ctx") -> int:
    data = {"content": [{"type": "text", "text": value}], "source": {"kind": "plugin", "plugin": "x"}}
    return session.append("context/message", data, surface_op="append").seq


def test_closed_tool_step(fx) -> None:
    session = fx.new_session()
    u = fx.user(session, "hi")
    a = fx.assistant(session, 1, 1, [CALL])
    r = fx.tool_result(session, 1, 1, "c1", "out")
    assert before_after(session, u) == (True, True)
    assert before_after(session, a) == (True, False)
    assert before_after(session, r) == (False, True)
    assert balanced_cuts(session) == [True, True, False, True]


def test_open_step(fx) -> None:
    session = fx.new_session()
    a = fx.assistant(session, 1, 1, [CALL])
    assert before_after(session, a) == (True, False)


def test_two_calls_then_two_results(fx) -> None:
    session = fx.new_session()
    fx.assistant(session, 1, 1, [CALL, CALL2])
    r1 = fx.tool_result(session, 1, 1, "c1", "one")
    r2 = fx.tool_result(session, 1, 1, "c2", "two")
    assert balanced_after(session, r1) is False
    assert balanced_after(session, r2) is True


def test_neutral_nodes(fx) -> None:
    session = fx.new_session()
    fx.assistant(session, 1, 1, [CALL])
    inside = context(session)
    fx.tool_result(session, 1, 1, "c1", "out")
    free = context(session)
    assert before_after(session, inside) == (False, False)
    assert before_after(session, free) == (True, True)


def test_a_checkpoint_over_the_whole_surface_is_balanced_and_old_seqs_are_gone(fx) -> None:
    session = fx.new_session()
    u = fx.user(session, "hi")
    a = fx.assistant(session, 1, 1, [CALL])
    r = fx.tool_result(session, 1, 1, "c1", "out")
    checkpoint = session.append(
        "user/message",
        {"content": [fx.text("summary")], "source": {"kind": "plugin", "plugin": "compact"}},
        surface_op={"op": "replace", "start": u, "end": r},
        sources=[u, a, r],
    ).seq
    assert before_after(session, checkpoint) == (True, True)
    for gone in (u, a, r):
        with pytest.raises(ToolPairingError, match=f"tool-pairing balance: surface seq {gone} not found"):
            balanced_before(session, gone)


def test_orphan_result_is_a_corrupt_surface_every_time(fx) -> None:
    session = fx.new_session()
    u = fx.user(session, "hi")
    orphan = session.append(
        "tool/result",
        {"turn": 1, "step": 1, "callId": "zz", "content": [], "isError": False},
        surface_op="append",
    ).seq
    message = f"tool-pairing balance: tool/result at surface seq {orphan} has no matching tool-call"
    for _ in range(2):
        with pytest.raises(ToolPairingError, match=message):
            balanced_after(session, u)


def test_unknown_seq_on_an_empty_surface(fx) -> None:
    with pytest.raises(ToolPairingError, match="tool-pairing balance: surface seq 999 not found"):
        balanced_before(fx.new_session(), 999)
