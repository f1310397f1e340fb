"""The compaction bracket's log invariants (`dsh_compact.invariant.check_compactions`)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_compact.config import load_compact_config
from dsh_compact.invariant import check_compactions
from dsh_compact.plugin import dsh_log_invariants
from dsh_compact.service import CompactionService
from dsh_host.log import Violation, check_log
from dsh_host.session.events import Event, SessionHeader

HEADER = SessionHeader(id="s", created_at=0)


def start(turn: int = 1) -> tuple[str, dict[str, Any]]:
    return "compact/start", {"turn": turn}


def summary(seqs: Any = (1, 2), range_: Any = None, tokens: Any = 10) -> tuple[str, dict[str, Any]]:
    seqs = list(seqs)
    shadowed_range = range_ or ({"start": seqs[0], "end": seqs[-1]} if seqs else {"start": 0, "end": 0})
    data = {
        "summary": [{"type": "text", "text": "s"}],
        "shadowedRange": shadowed_range,
        "shadowedSeqs": seqs,
        "shadowedTokenCount": tokens,
        "provider": "p",
        "model": "m",
    }
    return "compact/summary", data


def end(turn: int = 1, **extra: Any) -> tuple[str, dict[str, Any]]:
    return "compact/end", {"turn": turn, **extra}


def messages(*events: tuple[str, dict[str, Any]]) -> list[str]:
    log = [Event(kind, seq, 0, data=data) for seq, (kind, data) in enumerate(events)]
    return [v.message for v in check_compactions(HEADER, log)]


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([summary()], ["compact/summary has no matching compact/start"]),
        ([start(1), start(2)], ["compact/start for turn 2 while turn 1 is still compacting"]),
        ([start(), summary(), summary()], ["compact/summary repeated within one compaction"]),
        ([start(), summary(seqs=[])], ["compact/summary shadowedSeqs must be non-empty"]),
        (
            [start(), summary(seqs=[2, 3, 4], range_={"start": 1, "end": 4})],
            ["compact/summary shadowedRange must match the first and last shadowedSeqs"],
        ),
        ([start(), summary(tokens=-1)], ["compact/summary shadowedTokenCount must be a non-negative safe integer"]),
        ([start(), summary(tokens=1.5)], ["compact/summary shadowedTokenCount must be a non-negative safe integer"]),
        ([start(), summary(tokens=2**53)], ["compact/summary shadowedTokenCount must be a non-negative safe integer"]),
        ([end()], ["compact/end has no matching compact/start"]),
        ([start(1), end(2, error="x")], ["compact/end turn 2 does not match compact/start turn 1"]),
        ([start(), end()], ["successful compact/end requires one compact/summary"]),
        ([start(), summary(), end()], []),
        ([start(), end(error="summary unavailable")], []),
        # A second compaction is anchored at the previous checkpoint: a range by surface position.
        ([start(), summary(seqs=[28, 20]), end(), start(), end(error="x")], []),
    ],
)
def test_the_bracket_rules(events, expected) -> None:
    assert messages(*events) == expected


def test_a_crash_orphan_is_inert_once_repair_closed_its_turn() -> None:
    interrupted = ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    completed = ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert messages(start(1), interrupted, start(2), summary(), end(2)) == []
    # Any other turn end leaves the compaction open, as the reference's companion does.
    assert messages(start(1), completed, start(2)) == ["compact/start for turn 2 while turn 1 is still compacting"]


def test_violations_carry_the_seq_and_the_rule() -> None:
    log = [Event(kind, seq, 0, data=data) for seq, (kind, data) in enumerate([start(), end()])]
    assert list(check_compactions(HEADER, log)) == [
        Violation(1, "compact", "successful compact/end requires one compact/summary")
    ]


def test_the_plugin_contributes_the_rules() -> None:
    assert dsh_log_invariants() == (check_compactions,)


async def test_a_real_compaction_and_a_failed_one_pass_every_rule(fx) -> None:
    session = fx.conversation(4)
    config = load_compact_config({"threshold_ratio": 0.5, "retain_tokens": 180})
    service = CompactionService(config, summarizer=fx.StubSummarizer(), capacity=lambda target: 1000)
    assert await service.compact_if_needed(session, "pressure", None) is not None
    failing = CompactionService(config, summarizer=fx.StubSummarizer(error=RuntimeError("down")), capacity=len)
    with pytest.raises(RuntimeError):
        await failing.compact_region(session, session.surface.nodes[0], session.surface.nodes[0])
    kinds = [e.type for e in session.events if e.type.startswith("compact/")]
    assert kinds == ["compact/start", "compact/summary", "compact/end", "compact/start", "compact/end"]
    assert check_log(session.header, session.events, dsh_log_invariants()) == ()
