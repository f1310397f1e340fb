"""Selecting the head-anchored range to compact."""

from __future__ import annotations

import dataclasses

import pytest

from dsh_compact.errors import CompactionError
from dsh_compact.meter import Measurement, PricedNode, TokenMeter
from dsh_compact.region import SurfaceRange, select_compactable_range

CALL = {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}


def select(session, retain: int) -> SurfaceRange | None:
    return select_compactable_range(session, TokenMeter().measure(session), retain)


def test_the_range_stops_where_the_newest_nodes_fill_the_retain_budget(fx) -> None:
    assert select(fx.conversation(4), 180) == SurfaceRange(1, 16)


@pytest.mark.parametrize(
    ("retain", "expected"),
    [
        (0, SurfaceRange(1, 20)),  # only the newest node stays
        (91, SurfaceRange(1, 20)),  # 91 >= 91 at the newest node
        (92, SurfaceRange(1, 16)),
        (181, SurfaceRange(1, 16)),
        (182, SurfaceRange(1, 14)),
        (723, None),  # the walk needs the whole surface
        (10_000, None),
    ],
)
def test_retain_budgets(fx, retain: int, expected: SurfaceRange | None) -> None:
    assert select(fx.conversation(4), retain) == expected


def test_empty_surface(fx) -> None:
    assert select(fx.new_session(), 0) is None


def test_one_node(fx) -> None:
    session = fx.new_session()
    fx.user(session, "hi")
    assert select(session, 0) is None


def test_the_cut_moves_toward_the_head_until_balanced(fx) -> None:
    session = fx.new_session()
    u = fx.user(session, "question")
    fx.assistant(session, 1, 1, [CALL])
    fx.tool_result(session, 1, 1, "c1", "answer")
    # Retaining only the result would split the pair: the call is retained with it.
    assert select(session, 0) == SurfaceRange(u, u)


def test_a_lone_tool_pair_cannot_be_compacted(fx) -> None:
    session = fx.new_session()
    fx.assistant(session, 1, 1, [CALL])
    fx.tool_result(session, 1, 1, "c1", "answer")
    assert select(session, 1) is None


def test_an_open_tail_step_is_never_split(fx) -> None:
    session = fx.conversation(2)
    prompt = fx.user(session, "next")
    fx.assistant(session, 3, 1, [CALL])  # no result yet
    # The whole open step is retained: the cut lies before its call, never after it.
    assert select(session, 0) == SurfaceRange(1, prompt)


def test_tool_conversation_keeps_pairs_together(fx) -> None:
    session = fx.tool_conversation(3)
    selected = select(session, 80)
    assert selected is not None
    nodes = session.surface.nodes
    cut = nodes.index(selected.end) + 1
    assert session.event(nodes[cut]).type != "tool/result"


def test_a_measurement_of_another_surface_is_rejected(fx) -> None:
    session = fx.conversation(2)
    measurement = TokenMeter().measure(session)
    shuffled = dataclasses.replace(measurement, nodes=tuple(reversed(measurement.nodes)))
    with pytest.raises(CompactionError, match="token-meter surface does not match the current session surface"):
        select_compactable_range(session, shuffled, 0)
    short = Measurement(0, 0, 0, (PricedNode(1, 90),))
    with pytest.raises(CompactionError, match="does not match"):
        select_compactable_range(session, short, 0)
