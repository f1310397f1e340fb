"""The event model: lossless data, frozen events, contiguous seqs, envelope and legacy rules."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import logging
import math
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_host.session.events import (
    Event,
    InvalidEvent,
    SessionHeader,
    event_from_json,
    header_from_json,
    positions,
)
from dsh_host.session.frozen import thaw
from dsh_host.session.jsonl import InvalidLog, parse_log
from dsh_host.session.lossless import MAX_DEPTH, NotLosslessJson, canonical_text
from dsh_host.session.session import Session
from dsh_host.session.surface import SurfaceError


def new_session(seed=()) -> Session:
    return Session(SessionHeader(id="s", created_at=0, cwd="/w"), seed, clock=lambda: 1234)


def _cycle_dict():
    value = {"a": {}}
    value["a"]["back"] = value
    return {"outer": value}


def _cycle_list():
    value: list = []
    value.append([value])
    return {"items": value}


@dataclasses.dataclass
class _Point:
    x: int
    y: int


# (label, factory, fragment of the message naming where and why)
NOT_LOSSLESS = [
    ("nan", lambda: {"x": [1, float("nan")]}, "$.x[1]: nan is not finite"),
    ("inf", lambda: {"x": float("inf")}, "$.x: inf is not finite"),
    ("-inf", lambda: {"deep": {"x": -math.inf}}, "$.deep.x: -inf is not finite"),
    ("-0.0", lambda: {"x": {"y": -0.0}}, "$.x.y: -0.0 is not lossless JSON"),
    ("int key", lambda: {"x": {1: "one"}}, "$.x: key 1 is not a string"),
    ("tuple key", lambda: {(1, 2): "pair"}, "is not a string"),
    ("tuple", lambda: {"x": (1, 2)}, "$.x: tuple is not a JSON value"),
    ("set", lambda: {"x": {1, 2}}, "$.x: set is not a JSON value"),
    ("bytes", lambda: {"x": b"raw"}, "$.x: bytes is not a JSON value"),
    ("object", lambda: {"x": object()}, "$.x: object is not a JSON value"),
    # Values orjson writes as JSON of another type: the round trip tells them apart.
    ("enum", lambda: {"x": [enum.Enum("Color", "RED").RED]}, "$.x[0]: Color is not a JSON value"),
    ("uuid", lambda: {"x": uuid.UUID(int=1)}, "$.x: UUID is not a JSON value"),
    ("datetime", lambda: {"x": datetime.datetime(2026, 1, 1)}, "$.x: datetime is not a JSON value"),
    ("dataclass", lambda: {"x": _Point(1, 2)}, "$.x: _Point is not a JSON value"),
    ("dict cycle", _cycle_dict, "cycle"),
    ("list cycle", _cycle_list, "cycle"),
]


@pytest.mark.parametrize(("label", "factory", "where"), NOT_LOSSLESS, ids=[c[0] for c in NOT_LOSSLESS])
def test_append_rejects_data_that_is_not_lossless_json(label, factory, where):
    session = new_session()
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    before = session.events

    with pytest.raises(NotLosslessJson) as info:
        session.append("tool/call", factory())

    message = str(info.value)
    assert 'session event "tool/call" carries non-JSON-serializable data' in message
    assert where in message
    assert session.events == before
    assert session.seq == 1
    assert [e.seq for e in session.pending] == [0]


@pytest.mark.parametrize(("label", "factory", "where"), NOT_LOSSLESS, ids=[c[0] for c in NOT_LOSSLESS])
def test_load_rejects_data_that_is_not_lossless_json(label, factory, where):
    raw = {"type": "custom/thing", "seq": 0, "time": 0, "data": factory()}

    with pytest.raises(InvalidEvent) as info:
        event_from_json(raw)
    assert 'session event "custom/thing" carries non-JSON-serializable data' in str(info.value)
    assert where in str(info.value)

    session = new_session()
    with pytest.raises(InvalidEvent):
        session.append_raw(raw)
    assert session.seq == 0
    assert session.pending == []


@pytest.mark.parametrize("key", ["surfaceOp", "sourceEventSeqs"])
def test_load_rejects_envelope_fields_that_are_not_lossless(key):
    raw = {"type": "user/message", "seq": 0, "time": 0, "data": {}, "surfaceOp": "append", key: (0,)}
    with pytest.raises(InvalidEvent, match=f'"user/message" carries a non-JSON-serializable {key}'):
        event_from_json(raw)


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"custom/x","seq":0,"time":0,"data":{"v":NaN}}',
        '{"type":"custom/x","seq":0,"time":0,"data":{"v":Infinity}}',
        '{"type":"custom/x","seq":0,"time":0,"data":{"v":-Infinity}}',
        '{"type":"custom/x","seq":0,"time":0,"data":{"v":-0.0}}',
    ],
)
def test_a_log_line_that_is_not_lossless_is_rejected_with_its_line_number(line):
    header = '{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'
    with pytest.raises(InvalidLog, match=r"^f\.jsonl:2: "):
        parse_log([header, line + "\n"], name="f.jsonl")


def test_json_text_minus_zero_integer_is_plain_zero():
    # JSON `-0` parses to the Python int 0 (JavaScript would keep -0): nothing is lost here.
    header = '{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'
    parsed = parse_log([header, '{"type":"custom/x","seq":0,"time":0,"data":{"v":-0}}\n'])
    assert parsed.events[0].data == {"v": 0}


def test_lossless_accepts_json_values_and_shared_subobjects():
    shared = {"k": [1, 2]}
    value = {
        "none": None,
        "bools": [True, False],
        "ints": [0, -1, 2**53 - 1, 2**70],
        "floats": [0.0, 1.5, -2.25, 1e300],
        "text": "naïve 漢字 😀 \u0000 \ud800",
        "dag": [shared, shared],
        "empty": [{}, []],
    }
    text = canonical_text(value)
    assert json.loads(text) == value
    session = new_session()
    event = session.append("custom/value", value)
    assert thaw(event.data) == value
    assert event.data["dag"][0] is not event.data["dag"][1]  # a shared value becomes two copies, as in JSON


def nested(levels: int) -> list:
    """Arrays nested `levels` deep (`[]` is one level)."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


# Below and above orjson's own limit (254 levels), where the standard library's codec takes over.
@pytest.mark.parametrize("levels", [254, 255, MAX_DEPTH])
def test_lossless_accepts_nesting_up_to_the_limit(levels):
    event = new_session().append("custom/deep", nested(levels))
    assert json.loads(event.data_json) == nested(levels)
    assert thaw(event.data) == nested(levels)


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5_000])
def test_deeper_nesting_is_refused_naming_the_limit(levels):
    session = new_session()
    with pytest.raises(NotLosslessJson, match=f"nested deeper than {MAX_DEPTH} levels"):
        session.append("custom/deep", nested(levels))
    assert session.seq == 0


# Floats orjson spells unlike `repr` (small ones), and strings that look like them.
AWKWARD = st.sampled_from([1e-4, 1e-5, 2.5e-7, 5e-324, 1e16, 1.5e300, 123456789.125, "e-", "0.0000", "-0", "\ud800x"])
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not (f == 0 and math.copysign(1, f) < 0))
    | st.text()
    | AWKWARD,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=5) | st.sampled_from(["e-", "\udc00"]), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_canonical_text_is_exactly_the_standard_compact_encoding(value):
    assert canonical_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(JSON_VALUES)
def test_a_log_only_events_line_is_exactly_the_standard_compact_encoding(value):
    event = new_session().append("custom/x", {"v": value})
    assert event.data_json == canonical_text({"v": value})
    assert event.to_line() == json.dumps(
        {"type": "custom/x", "seq": 0, "time": 1234, "data": {"v": value}}, ensure_ascii=False, separators=(",", ":")
    )


@given(
    st.lists(
        st.integers(min_value=0, max_value=2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.booleans(),
        max_size=30,
    )
)
def test_a_line_spells_its_source_seqs_exactly_as_the_standard_compact_encoding(seqs):
    event = Event("assistant/message", 0, 1234, surface_op="append", source_event_seqs=seqs, data_json="{}")
    expected = {"type": "assistant/message", "seq": 0, "time": 1234, "data": {}}
    expected |= {"sourceEventSeqs": seqs, "surfaceOp": "append"}
    assert event.to_line() == json.dumps(
        expected,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def test_an_infinite_source_seq_is_written_as_javascript_writes_it():
    # JSON has no infinity: JSON.stringify writes null, where Python's json module would write Infinity.
    event = Event("assistant/message", 0, 1234, surface_op="append", source_event_seqs=[float("inf")], data_json="{}")
    assert '"sourceEventSeqs":[null]' in event.to_line()


def test_every_field_of_an_event_is_read_only():
    event = new_session().append("custom/x", {"a": 1})
    for name in ("type", "seq", "time", "data", "surface_op", "source_event_seqs", "data_json"):
        with pytest.raises(AttributeError):
            setattr(event, name, None)
        with pytest.raises(AttributeError):
            delattr(event, name)
    with pytest.raises(AttributeError):
        event.extra = 1  # type: ignore[attr-defined]
    assert (event.type, event.seq, event.data) == ("custom/x", 0, {"a": 1})


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
        | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not (f == 0 and math.copysign(1, f) < 0))
        | st.text(),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
        max_leaves=20,
    )
)
def test_any_json_value_round_trips_through_append(value):
    session = new_session()
    session.append("user/message", {"content": [], "source": {"kind": "user"}}, surface_op="append")
    event = session.append("assistant/message", {"v": value}, surface_op="append", sources=[0])
    assert thaw(event.data) == {"v": value}
    assert json.loads(event.to_line())["data"] == {"v": value}
    # The line reuses the data's text; it is exactly the encoding of the whole event.
    compact = json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"))
    assert event.to_line() == compact
    loaded = event_from_json(json.loads(compact))
    assert loaded == event and loaded.to_line() == compact


def test_appended_events_are_frozen_and_detached_from_the_input():
    session = new_session()
    data = {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "meta": {"a": [1]}}
    event = session.append("context/message", data, surface_op="append")

    data["content"][0]["text"] = "changed"
    data["meta"]["a"].append(2)
    assert event.data["content"][0]["text"] == "hi"
    assert event.data["meta"] == {"a": [1]}

    with pytest.raises(TypeError, match="frozen"):
        event.data["source"] = {"kind": "plugin"}
    with pytest.raises(TypeError, match="frozen"):
        event.data["meta"]["a"].append(3)
    with pytest.raises(TypeError, match="frozen"):
        del event.data["content"]
    with pytest.raises(TypeError, match="frozen"):
        event.data["content"][0].update(text="x")
    with pytest.raises(TypeError, match="frozen"):
        event.data["meta"]["a"][0] = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 9  # type: ignore[misc]
    assert session.event(0) is event
    assert thaw(event.data)["meta"] == {"a": [1]}


def test_events_snapshot_never_grows_and_seq_is_the_log_length():
    session = new_session()
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    snapshot = session.events
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(snapshot) == 1
    assert [e.seq for e in session.events] == [0, 1]
    assert session.seq == 2
    assert all(e.time == 1234 for e in session.events)


def test_seed_seqs_must_be_contiguous_from_zero(log_builder):
    events = log_builder.events([log_builder.raw("turn/start", 0), log_builder.raw("turn/end", 2)])
    with pytest.raises(
        SurfaceError, match="invalid seed event at index 1: session event seq 2 is not contiguous; expected 1"
    ):
        new_session(events)
    with pytest.raises(InvalidEvent, match="seq 3 is not contiguous; expected 0"):
        event_from_json(log_builder.raw("turn/start", 3), expected_seq=0)
    session = new_session(log_builder.events([log_builder.raw("turn/start", 0)]))
    with pytest.raises(InvalidEvent, match="not contiguous"):
        session.append_raw(log_builder.raw("turn/end", 5))
    assert session.seq == 1


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("not an object", "invalid event envelope: not an object"),
        ({"type": "turn/start", "seq": 0, "time": 0, "data": {}, "id": "x"}, "unexpected key(s) ['id']"),
        (
            {"type": "turn/start", "seq": 0, "time": 0, "data": {}, "parent": 1},
            "unexpected key(s) ['parent']",
        ),
        ({"type": "", "seq": 0, "time": 0, "data": {}}, "type must be a non-empty string"),
        ({"type": 7, "seq": 0, "time": 0, "data": {}}, "type must be a non-empty string"),
        (
            {"type": "turn/start", "seq": -1, "time": 0, "data": {}},
            "seq -1 is not a non-negative safe integer",
        ),
        ({"type": "turn/start", "seq": 0.0, "time": 0, "data": {}}, "seq 0.0 is not"),
        ({"type": "turn/start", "seq": True, "time": 0, "data": {}}, "seq True is not"),
        ({"type": "turn/start", "seq": 2**53, "time": 0, "data": {}}, "is not a non-negative safe integer"),
        ({"type": "turn/start", "seq": 0, "time": -5, "data": {}}, "time -5 is not"),
        ({"type": "turn/start", "seq": 0, "time": "now", "data": {}}, "time 'now' is not"),
        ({"type": "turn/start", "seq": 0, "time": 0}, "data is missing"),
    ],
)
def test_envelope_rules(raw, message):
    with pytest.raises(InvalidEvent) as info:
        event_from_json(raw)
    assert message in str(info.value)


def test_envelope_keys_are_read_in_any_order_and_written_in_reference_order(log_builder):
    raw = {
        "surfaceOp": "append",
        "sourceEventSeqs": [0],
        "data": {"x": 1},
        "time": 5,
        "seq": 1,
        "type": "tool/result",
    }
    event = event_from_json(raw)
    assert list(json.loads(event.to_line())) == [
        "type",
        "seq",
        "time",
        "data",
        "sourceEventSeqs",
        "surfaceOp",
    ]
    assert event.to_line() == (
        '{"type":"tool/result","seq":1,"time":5,"data":{"x":1},"sourceEventSeqs":[0],"surfaceOp":"append"}'
    )
    assert event_from_json(json.loads(event.to_line())) == event


def test_legacy_vocabulary_is_rejected_on_append_and_on_load(log_builder):
    session = new_session()
    for kind in ("request/header-delta", "mode/set"):
        with pytest.raises(ValueError, match="legacy event type"):
            session.append(kind, {})
        with pytest.raises(InvalidEvent, match="legacy event type"):
            event_from_json(log_builder.raw(kind, 0))
    header = {"config": {"provider": "p", "model": "m"}}
    with pytest.raises(ValueError, match="'fallback'"):
        session.append("request/header", {"header": header, "reason": "fallback"})
    with pytest.raises(InvalidEvent, match="'fallback'"):
        event_from_json(log_builder.raw("request/header", 0, {"header": header, "reason": "fallback"}))
    assert session.seq == 0
    # The current vocabulary is fine.
    for reason in ("initial", "resume", "change"):
        session.append("request/header", {"header": header, "reason": reason})
    assert session.seq == 3


def test_unknown_event_types_are_kept(log_builder):
    events = log_builder.events(
        [
            log_builder.raw("approval/asked", 0, {"id": "a", "toolName": "bash"}),
            log_builder.raw("todo/write", 1),
        ]
    )
    session = new_session(events)
    assert [e.type for e in session.events] == ["approval/asked", "todo/write"]
    assert session.surface.nodes == []


def test_a_failing_listener_is_contained_and_a_reentrant_append_is_refused(caplog):
    session = new_session()
    seen: list[str] = []

    def reenter(s, event):
        seen.append(event.type)
        s.append("custom/echo", {})

    def boom(s, event):
        raise RuntimeError("observer failed")

    session.subscribe(reenter)
    unsubscribe = session.subscribe(boom)
    with caplog.at_level(logging.WARNING, logger="dsh"):
        event = session.append("custom/first", {})
    assert event.seq == 0
    assert [e.type for e in session.events] == ["custom/first"]
    assert seen == ["custom/first"]
    assert len([r for r in caplog.records if "listener failed" in r.getMessage()]) == 2
    assert any("cannot reenter" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    unsubscribe()
    session.append("custom/second", {})
    assert seen == ["custom/first", "custom/second"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 1}, "unsupported session format version 1"),
        ({"version": "0"}, "unsupported session format version"),
        ({"type": "sessionx"}, "first line is not a session header"),
        ({"id": 5}, "id must be a string"),
        ({"createdAt": "yesterday"}, "createdAt must be a finite number"),
        ({"createdAt": True}, "createdAt must be a finite number"),
        ({"cwd": "relative/path"}, "cwd must be an absolute path"),
        ({"delegationDepth": -1}, "delegationDepth must be a non-negative safe integer"),
        ({"delegationDepth": 1.5}, "delegationDepth must be a non-negative safe integer"),
        ({"delegationDepth": "0"}, "delegationDepth must be a non-negative safe integer"),
        ({"seedLength": -2}, "seedLength must be a non-negative safe integer"),
        ({"parentSession": 3}, "parentSession must be a string"),
    ],
)
def test_header_validation(change, message):
    raw = {"type": "session", "version": 0, "id": "s", "createdAt": 0, "cwd": "/w", "delegationDepth": 0}
    raw.update(change)
    with pytest.raises(InvalidEvent) as info:
        header_from_json(raw)
    assert message in str(info.value)


def test_header_line_always_writes_delegation_depth():
    header = header_from_json({"type": "session", "version": 0, "id": "s", "createdAt": 7, "cwd": "/w"})
    assert header.delegation_depth is None
    assert header.to_json() == {
        "type": "session",
        "version": 0,
        "id": "s",
        "createdAt": 7,
        "cwd": "/w",
        "delegationDepth": 0,
    }
    assert isinstance(Event(type="x", seq=0, time=0, data={}), Event)


@pytest.mark.parametrize("kind", ["assistant/chunk", 'odd,"data":{"type"', "custom/\ud800", "é/ü"])
def test_a_log_only_event_carries_its_line_and_its_data_is_cut_from_it(kind):
    session = new_session()
    data = {"chunk": {"text": ',"data":{} "quoted" \\ back', "n": [1, 2.5, None]}, "k": True}
    event = session.append(kind, data)
    expected = json.dumps(
        {"type": kind, "seq": 0, "time": event.time, "data": data}, ensure_ascii=False, separators=(",", ":")
    )
    assert event.line == event.to_line() == expected
    assert event.data_json == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    assert event.data == data
    assert event_from_json(json.loads(event.to_line())) == event


def test_each_line_spells_its_own_time():
    times = iter([5, 5, 1_700_000_000_000, 6, 6])
    session = Session(SessionHeader(id="s", created_at=0), clock=lambda: next(times))
    events = [session.append("custom/x", {"i": i}) for i in range(5)]
    assert [json.loads(e.to_line())["time"] for e in events] == [5, 5, 1_700_000_000_000, 6, 6]


@given(
    st.lists(st.sampled_from(["", "user/message", "assistant/chunk", 0, None])),
    st.sampled_from(["", "user/message", 0]),
)
def test_positions_are_every_index_holding_the_value_in_order(items, value):
    assert list(positions(items, value)) == [at for at, item in enumerate(items) if item == value]
