"""`check_log`: each rule broken by a hand-built log, the reference logs, and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_host.log import LogInvariant, Note, Violation, check_log
from dsh_host.session.events import Event, SessionHeader, event_from_json
from dsh_host.session.jsonl import read_log_file
from tests.log_check import PRE_PROVIDER

HEADER = SessionHeader(id="s", created_at=0)
USER = {"kind": "user"}
PROVENANCE = {"provider": "p", "model": "m"}
RULES = {
    "seq",
    "surface",
    "shape",
    "seed-shape",
    "turn-nesting",
    "step-scope",
    "tool-pairing",
    "turn-enclosure",
    "fork-seed",
}


def ev(type: str, data: Any = None, *, op: Any = None, sources: Any = None) -> dict[str, Any]:
    """An event in log form; `seq` is filled in by `log`."""
    out: dict[str, Any] = {"type": type, "time": 0, "data": {} if data is None else data}
    if sources is not None:
        out["sourceEventSeqs"] = sources
    if op is not None:
        out["surfaceOp"] = op
    return out


def log(*raws: dict[str, Any]) -> list[Event]:
    return [_event({**raw, "seq": raw.get("seq", i)}) for i, raw in enumerate(raws)]


def _event(raw: dict[str, Any]) -> Event:
    data = raw["data"]
    if raw["type"] in ("request/header-delta", "mode/set") or (
        isinstance(data, dict) and data.get("reason") == "fallback"
    ):
        # Legacy vocabulary no reader accepts: only a log made in memory can hold it.
        return Event(raw["type"], raw["seq"], raw["time"], data=raw["data"])
    return event_from_json(raw)


def turn_start(turn: int = 1) -> dict[str, Any]:
    return ev("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})


def turn_end(turn: int = 1, reason: Any = None) -> dict[str, Any]:
    return ev("turn/end", {"turn": turn, "reason": reason or {"kind": "completed"}})


def user(text: str = "hi") -> dict[str, Any]:
    return ev("user/message", {"content": [{"type": "text", "text": text}], "source": USER}, op="append")


def chunk(turn: int = 1, step: int = 1) -> dict[str, Any]:
    return ev("assistant/chunk", {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": "x"}})


def assistant(turn: int = 1, step: int = 1, content: Any = None, sources: Any = None) -> dict[str, Any]:
    data = {"turn": turn, "step": step, "content": content or [], "provenance": PROVENANCE}
    return ev("assistant/message", data, op="append", sources=[] if sources is None else sources)


def call(call_id: str = "c1", turn: int = 1, step: int = 1) -> dict[str, Any]:
    return ev("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "read", "arguments": "{}"})


def result(call_id: str = "c1", turn: int = 1, step: int = 1, *, sources: Any = None, **extra: Any) -> dict[str, Any]:
    data = {"turn": turn, "step": step, "callId": call_id, "content": [{"type": "text", "text": "out"}]}
    return ev("tool/result", {**data, "isError": False, **extra}, op="append", sources=sources)


def tool_turn() -> list[dict[str, Any]]:
    """A canonical turn: prompt, a step with one tool call and its result, a closing step."""
    tool_call = {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}
    return [
        turn_start(),
        user(),
        ev("step/start", {"turn": 1, "step": 1}),
        ev("request/header", {"header": {"config": PROVENANCE}, "reason": "initial"}),
        chunk(),
        assistant(content=[tool_call], sources=[4]),
        call(),
        result(sources=[6]),
        ev("step/end", {"turn": 1, "step": 1}),
        ev("step/start", {"turn": 1, "step": 2}),
        assistant(step=2, content=[{"type": "text", "text": "done"}]),
        ev("step/end", {"turn": 1, "step": 2}),
        turn_end(),
    ]


def rules_of(findings: tuple[Violation | Note, ...]) -> list[tuple[int | None, str]]:
    return [(f.seq, f.rule) for f in findings]


def test_a_canonical_log_has_no_violation() -> None:
    events = log(*tool_turn(), turn_start(2), ev("session/title", {"title": "t"}), turn_end(2))
    assert check_log(HEADER, events) == ()


def test_an_empty_log_has_no_violation() -> None:
    assert check_log(HEADER, []) == ()


def test_seq_must_be_contiguous() -> None:
    events = log(turn_start(), {**turn_end(), "seq": 5})
    assert check_log(HEADER, events) == (Violation(5, "seq", "session event seq 5 is not contiguous; expected 1"),)


def test_surface_rules_are_checked_and_a_bad_event_is_folded_as_log_only() -> None:
    bad_replace = ev("user/message", user()["data"], op={"op": "replace", "start": 9, "end": 9}, sources=[1])
    later = ev("user/message", user()["data"], op={"op": "replace", "start": 1, "end": 1}, sources=[1])
    events = log(turn_start(), user(), bad_replace, later, turn_end())
    assert check_log(HEADER, events) == (Violation(2, "surface", "surface replace: start seq 9 not found in surface"),)


def test_surface_marker_rules() -> None:
    events = log(turn_start(), ev("user/message", user()["data"]), ev("turn/end", turn_end()["data"], op="append"))
    assert rules_of(check_log(HEADER, events)) == [(1, "surface"), (2, "surface")]
    assert "requires a surfaceOp marker" in check_log(HEADER, events)[0].message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (ev("request/header-delta"), "legacy event type 'request/header-delta' is not supported"),
        (ev("mode/set"), "legacy event type 'mode/set' is not supported"),
        (
            ev("request/header", {"header": {"config": PROVENANCE}, "reason": "fallback"}),
            "legacy request/header reason 'fallback' is not supported",
        ),
    ],
)
def test_legacy_vocabulary_is_a_shape_violation(raw: dict[str, Any], message: str) -> None:
    events = log(turn_start(), ev("step/start", {"turn": 1, "step": 1}), raw)
    assert check_log(HEADER, events) == (Violation(2, "shape", message),)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (ev("request/header", {"header": {"config": {"model": "m"}}, "reason": "initial"}), "request/header config"),
        (ev("request/header", {"header": {"config": {"provider": "", "model": "m"}}}), "request/header config"),
        (assistant() | {"data": {"turn": 1, "step": 1, "content": []}}, "assistant/message provenance"),
    ],
)
def test_a_shape_from_before_provider_routing_is_a_note_not_a_violation(raw: dict[str, Any], message: str) -> None:
    events = log(turn_start(), ev("step/start", {"turn": 1, "step": 1}), raw)
    [note] = check_log(HEADER, events)
    assert type(note) is Note
    assert (note.seq, note.rule) == (2, "seed-shape")
    assert note.message.startswith(message)
    assert note.message.endswith("resuming or forking this log is not supported)")


def test_an_aborted_turn_end_with_more_than_its_kind_is_a_note() -> None:
    events = log(turn_start(), turn_end(reason={"kind": "aborted", "step": 1}))
    [note] = check_log(HEADER, events)
    assert type(note) is Note and (note.seq, note.rule) == (1, "seed-shape")
    assert check_log(HEADER, log(turn_start(), turn_end(reason={"kind": "aborted"}))) == ()


def test_a_note_never_equals_a_violation_with_the_same_fields() -> None:
    assert Note(1, "r", "m") != Violation(1, "r", "m")
    assert Note(1, "r", "m") == Note(1, "r", "m")


@pytest.mark.parametrize(
    ("raws", "expected"),
    [
        (
            [turn_start(), turn_start(2)],
            [(1, "turn/start 2 while turn 1 is still open"), (1, "turn/start expected turn 1, got 2")],
        ),
        ([turn_start(2)], [(0, "turn/start expected turn 1, got 2")]),
        ([turn_start(), turn_end(2)], [(1, "turn/end 2 does not match open turn 1")]),
        ([turn_end()], [(0, "turn/end 1 does not match open turn null")]),
        (
            [turn_start(), ev("step/start", {"turn": 1, "step": 1}), turn_end()],
            [(2, "turn/end 1 while step 1 is still open")],
        ),
        ([ev("step/start", {"turn": 1, "step": 1})], [(0, "step/start in turn 1 but open turn is null")]),
        (
            [turn_start(), ev("step/start", {"turn": 1, "step": 1}), ev("step/start", {"turn": 1, "step": 2})],
            [(2, "step/start 2 while step 1 is still open"), (2, "step/start expected step 1 in turn 1, got 2")],
        ),
        (
            [turn_start(), ev("step/start", {"turn": 1, "step": 2})],
            [(1, "step/start expected step 1 in turn 1, got 2")],
        ),
        ([turn_start(True)], [(0, "turn/start expected turn 1, got true")]),
    ],
)
def test_turn_nesting(raws: list[dict[str, Any]], expected: list[tuple[int, str]]) -> None:
    found = check_log(HEADER, log(*raws))
    assert [(v.seq, v.message) for v in found if v.rule == "turn-nesting"] == expected


@pytest.mark.parametrize("kind", ["chunk", "assistant", "call", "result", "step/end"])
def test_step_scoped_events_name_the_open_turn_and_step(kind: str) -> None:
    wrong = {
        "chunk": chunk(step=2),
        "assistant": assistant(step=2),
        "call": call(step=2),
        "result": result(step=2),
        "step/end": ev("step/end", {"turn": 1, "step": 2}),
    }[kind]
    events = log(turn_start(), ev("step/start", {"turn": 1, "step": 1}), wrong)
    found = [v for v in check_log(HEADER, events) if v.rule == "step-scope"]
    assert [(v.seq, v.message.split(" names ")[1]) for v in found] == [(2, "turn 1/step 2 but open is turn 1/step 1")]


def test_a_step_scoped_event_outside_any_step() -> None:
    [violation] = check_log(HEADER, log(turn_start(), chunk()))
    assert violation == Violation(1, "step-scope", "assistant/chunk names turn 1/step 1 but open is turn 1/step null")


def test_a_tool_result_answers_a_call_of_its_step() -> None:
    step = [turn_start(), ev("step/start", {"turn": 1, "step": 1})]
    [violation] = check_log(HEADER, log(*step, result()))
    assert violation == Violation(2, "tool-pairing", "tool/result for c1 with no prior tool/call in this step")
    # A call of an earlier step does not count: step/end clears the pending calls.
    later = [call(), ev("step/end", {"turn": 1, "step": 1}), ev("step/start", {"turn": 1, "step": 2})]
    assert rules_of(check_log(HEADER, log(*step, *later, result(step=2)))) == [(5, "tool-pairing")]
    # Nor does a call already answered.
    assert rules_of(check_log(HEADER, log(*step, call(), result(sources=[2]), result()))) == [(4, "tool-pairing")]


def test_the_synthetic_not_started_result_needs_no_call() -> None:
    error = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    step = [turn_start(), ev("step/start", {"turn": 1, "step": 1})]
    not_started = result(error=error) | {"data": {**result(error=error)["data"], "isError": True}}
    assert check_log(HEADER, log(*step, not_started)) == ()
    # Only an error result with that code is exempt.
    assert rules_of(check_log(HEADER, log(*step, result(error=error)))) == [(2, "tool-pairing")]


def test_a_tool_result_rewrite_only_needs_an_open_turn() -> None:
    closed = tool_turn()
    original = closed[7]
    rewrite = ev(
        "tool/result",
        {**original["data"], "content": [{"type": "text", "text": "pruned"}]},
        op={"op": "replace", "start": 7, "end": 7},
        sources=[7],
    )
    inside = log(*closed, turn_start(2), rewrite, turn_end(2))
    assert check_log(HEADER, inside) == ()
    outside = log(*closed, rewrite)
    assert check_log(HEADER, outside) == (
        Violation(13, "turn-enclosure", "tool/result surface replacement appended outside any open turn"),
    )


@pytest.mark.parametrize("kind", ["user/message", "session/title", "custom/x", "compact/start", "request/header"])
def test_every_other_event_is_turn_enclosed(kind: str) -> None:
    raw = user() if kind == "user/message" else ev(kind, {"header": {"config": PROVENANCE}})
    [violation] = check_log(HEADER, log(turn_start(), turn_end(), raw))
    assert violation == Violation(
        2, "turn-enclosure", f"{kind} appended outside any open turn (every event must be turn-enclosed)"
    )


def test_a_fork_seed_ends_at_a_turn_end() -> None:
    events = log(*tool_turn())
    assert check_log(SessionHeader(id="c", created_at=0, seed_length=13), events) == ()
    assert check_log(SessionHeader(id="c", created_at=0, seed_length=0), events) == ()
    assert check_log(SessionHeader(id="c", created_at=0, seed_length=12), events) == (
        Violation(11, "fork-seed", "the fork seed must end at turn/end, got step/end"),
    )
    assert check_log(SessionHeader(id="c", created_at=0, seed_length=14), events) == (
        Violation(None, "fork-seed", "seedLength 14 exceeds the log's 13 events"),
    )


def test_extra_invariants_run_after_the_builtin_ones_and_everything_is_ordered_by_seq() -> None:
    def every_title(header: SessionHeader, events: list) -> list[Violation]:
        return [Violation(e.seq, "title", "seen") for e in events if e.type == "session/title"]

    invariant: LogInvariant = every_title
    events = log(ev("session/title", {"title": "t"}), turn_start(), ev("session/title", {"title": "u"}))
    found = check_log(SessionHeader(id="c", created_at=0, seed_length=9), events, [invariant])
    assert rules_of(found) == [(None, "fork-seed"), (0, "turn-enclosure"), (0, "title"), (2, "title")]


def test_an_extra_invariant_may_yield_notes_beside_violations() -> None:
    def untitled(header: SessionHeader, events: list) -> list[Violation | Note]:
        return [Note(None, "untitled", "no session/title")]

    found = check_log(HEADER, log(turn_start(), {**turn_end(), "seq": 5}), [untitled])
    assert found == (
        Note(None, "untitled", "no session/title"),
        Violation(5, "seq", "session event seq 5 is not contiguous; expected 1"),
    )


def test_reference_logs_break_no_rule_and_only_pre_provider_shapes_are_noted(reference_logs) -> None:
    """Three reference logs carry shapes from before provider routing: a `request/header` config
    and `assistant/message` provenance without a provider. They load and read fine, they only
    cannot be resumed or forked: the check notes exactly those events and finds no violation."""
    assert len(reference_logs) == 80
    for path in reference_logs:
        parsed = read_log_file(path)
        found = check_log(parsed.header, parsed.events)
        expected = PRE_PROVIDER.get(parsed.header.id, [])
        assert [f.seq for f in found] == expected, path.name
        assert all(type(f) is Note and f.rule == "seed-shape" for f in found), path.name
        for note in found:
            kind = parsed.events[note.seq].type
            assert note.message.startswith(
                "request/header config" if kind == "request/header" else "assistant/message provenance"
            )


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["turn", "step", "x"]), inner),
    max_leaves=6,
)
event_types = st.sampled_from(
    [
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "user/message",
        "request/header",
        "custom/x",
    ]
)
surface_ops = (
    st.none()
    | st.just("append")
    | st.fixed_dictionaries({"op": st.just("replace"), "start": st.integers(0, 6), "end": st.integers(0, 6)})
)


@given(
    st.lists(
        st.tuples(
            event_types,
            json_values | st.fixed_dictionaries({"turn": st.integers(0, 3), "step": st.integers(0, 3)}),
            surface_ops,
        ),
        max_size=12,
    )
)
def test_any_log_is_checked_without_raising(raws) -> None:
    events = log(*(ev(kind, data, op=op) for kind, data, op in raws))
    for finding in check_log(HEADER, events):
        assert finding.rule in RULES
        assert finding.seq is not None and 0 <= finding.seq < len(events)
        assert finding.message


@st.composite
def agent_logs(draw) -> list[dict[str, Any]]:
    """Logs the agent loop could write: turns of steps with chunks, tool calls and results."""
    raws: list[dict[str, Any]] = []
    for turn in range(1, draw(st.integers(1, 3)) + 1):
        raws += [turn_start(turn), user()]
        for step in range(1, draw(st.integers(0, 3)) + 1):
            raws.append(ev("step/start", {"turn": turn, "step": step}))
            chunks = [len(raws) + i for i in range(draw(st.integers(0, 2)))]
            raws += [chunk(turn, step) for _ in chunks]
            calls = [f"t{turn}s{step}c{i}" for i in range(draw(st.integers(0, 2)))]
            blocks = [{"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in calls]
            raws.append(assistant(turn, step, blocks, sources=chunks))
            for call_id in calls:
                raws.append(call(call_id, turn, step))
                raws.append(result(call_id, turn, step, sources=[len(raws) - 1]))
            raws.append(ev("step/end", {"turn": turn, "step": step}))
        raws.append(turn_end(turn))
    return raws


@given(agent_logs(), st.data())
def test_agent_logs_pass_and_losing_a_boundary_breaks_them(raws, data) -> None:
    assert check_log(HEADER, log(*raws)) == ()
    boundaries = [i for i, raw in enumerate(raws) if raw["type"] in ("turn/start", "step/start", "tool/call")]
    dropped = data.draw(st.sampled_from(boundaries))
    kept = [raw for i, raw in enumerate(raws) if i != dropped]
    # Renumber and drop provenance (it may name the lost event): only the nesting rules remain.
    kept = [{k: v for k, v in raw.items() if k != "sourceEventSeqs"} | {"seq": i} for i, raw in enumerate(kept)]
    for raw in kept:
        if raw["type"] == "assistant/message":
            raw["sourceEventSeqs"] = []
    assert {v.rule for v in check_log(HEADER, log(*kept))} & {"turn-nesting", "step-scope", "tool-pairing"}
