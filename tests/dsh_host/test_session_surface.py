"""Surface folding (the whole-log fold and the live session agree), derived messages, event
classification and request headers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_host.session import session as session_module
from dsh_host.session.events import SessionHeader, display_prompt_content, event_from_json
from dsh_host.session.messages import derive_event_message
from dsh_host.session.request_header import canonical_header, fold_request_header, header_equals
from dsh_host.session.session import Session
from dsh_host.session.surface import Replacement, SurfaceError, classify, fold


def header(session_id: str = "s") -> SessionHeader:
    return SessionHeader(id=session_id, created_at=0, cwd="/w")


def surface_of(raws) -> tuple[int, ...]:
    """Fold a log both ways (whole-log fold and the live session) and require they agree."""
    events = [event_from_json(raw) for raw in raws]
    folded = fold(events)
    session = Session(header(), events)
    assert tuple(session.surface.nodes) == folded.nodes
    assert session.surface.replace_generation == folded.replace_generation
    # Incremental: appending one event at a time gives the same surface at every prefix.
    live = Session(header())
    for raw in raws:
        live.append_raw(raw)
        assert tuple(live.surface.nodes) == fold(events[: live.seq]).nodes
    return folded.nodes


def assert_rejected(raws, message: str) -> None:
    """The last event is invalid: fold, seeding and a live append all refuse it, atomically."""
    events = [event_from_json(raw) for raw in raws]
    with pytest.raises(SurfaceError) as info:
        fold(events)
    assert message in str(info.value)
    with pytest.raises(SurfaceError, match=f"invalid seed event at index {len(raws) - 1}: "):
        Session(header(), events)
    live = Session(header(), events[:-1])
    nodes, generation = list(live.surface.nodes), live.surface.replace_generation
    messages = live.derive_messages()
    with pytest.raises(SurfaceError) as info:
        live.append_raw(raws[-1])
    assert message in str(info.value)
    assert live.seq == len(raws) - 1
    assert live.surface.nodes == nodes
    assert live.surface.replace_generation == generation
    assert live.derive_messages() == messages


# -- appends, replaces and the rules every surface event follows ----------------------------------


def test_a_turn_puts_its_prompt_and_answer_on_the_surface(log_builder):
    L = log_builder
    raws = [L.raw("turn/start", 0), L.user(1), L.assistant(2), L.raw("turn/end", 3)]
    assert surface_of(raws) == (1, 2)


def test_an_appended_tool_result_joins_the_surface(log_builder):
    L = log_builder
    raws = [L.raw("turn/start", 0), L.user(1), L.assistant(2), L.raw("turn/end", 3)]
    raws.append(L.raw("tool/result", 4, L.tool_result_data("c1", "out"), op="append"))
    assert surface_of(raws) == (1, 2, 4)


def test_a_replace_of_a_leading_run_puts_the_replacement_first(log_builder):
    L = log_builder
    raws = [L.user(0), L.user(1), L.user(2), L.assistant(3, op=L.replace(0, 1), sources=[0, 1])]
    assert surface_of(raws) == (3, 2)


def test_a_replace_of_the_last_node_takes_its_place(log_builder):
    L = log_builder
    assert surface_of([L.user(0), L.user(1), L.assistant(2, op=L.replace(1, 1), sources=[1])]) == (0, 2)


def test_a_replace_in_the_middle_keeps_the_nodes_around_it(log_builder):
    L = log_builder
    raws = [L.user(0), L.user(1), L.user(2), L.assistant(3, op=L.replace(1, 1), sources=[1])]
    assert surface_of(raws) == (0, 3, 2)


def test_a_nested_replace_uses_surface_positions_not_seq_order(log_builder):
    L = log_builder
    raws = [
        L.user(0),
        L.user(1),
        L.assistant(2, op=L.replace(0, 0), sources=[0]),
        L.assistant(3, op=L.replace(2, 1), sources=[2, 1]),
    ]
    assert surface_of(raws) == (3,)
    folded = fold([event_from_json(r) for r in raws])
    assert folded.replacements == (
        Replacement(seq=2, start=0, end=0, shadowed_seqs=(0,)),
        Replacement(seq=3, start=2, end=1, shadowed_seqs=(2, 1)),
    )
    assert folded.replace_generation == 2


def test_a_replace_range_must_name_current_nodes_in_surface_order(log_builder):
    L = log_builder
    assert_rejected([L.user(0), L.user(1), L.assistant(2, op=L.replace(5, 0), sources=[0])], "start seq 5 not found")
    assert_rejected([L.user(0), L.user(1), L.assistant(2, op=L.replace(0, 99), sources=[0])], "end seq 99 not found")
    assert_rejected(
        [L.user(0), L.user(1), L.assistant(2, op=L.replace(1, 0), sources=[0, 1])],
        "start seq 1 (index 1) is after end seq 0 (index 0)",
    )


def test_a_shadowed_seq_is_not_on_the_surface(log_builder):
    L = log_builder
    raws = [L.user(0), L.user(1), L.assistant(2, op=L.replace(0, 0), sources=[0])]
    assert_rejected([*raws, L.assistant(3, op=L.replace(0, 1), sources=[0, 1])], "start seq 0 not found")


def test_a_replace_must_source_every_shadowed_node(log_builder):
    L = log_builder
    assert_rejected([L.user(0), L.user(1), L.assistant(2, op=L.replace(0, 1), sources=[0])], "missing 1")
    assert_rejected([L.user(0), L.user(1), L.assistant(2, op=L.replace(0, 1))], "missing 0, 1")
    assert_rejected(
        [
            L.user(0),
            L.user(1),
            L.user(2, op=L.replace(0, 0), sources=[0]),
            L.user(3, op=L.replace(2, 1), sources=[1]),
        ],
        "missing 2",
    )


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ({"0": 0}, "must be an array"),
        ("0", "must be an array"),
        ([], "must not be empty"),
        ([0, 0], "contains duplicates"),
        (["0"], "non-negative safe integers"),
        ([0.5], "non-negative safe integers"),
        ([-1], "non-negative safe integers"),
        ([True], "non-negative safe integers"),
        ([2**53], "non-negative safe integers"),
        ([2], "must reference earlier events"),
        ([0, 7], "must reference earlier events"),
    ],
)
def test_provenance_must_be_distinct_earlier_seqs(log_builder, sources, message):
    L = log_builder
    assert_rejected([L.user(0), L.raw("turn/start", 1), L.user(2, sources=sources)], message)


def test_carried_null_sources_are_invalid(log_builder):
    L = log_builder
    raw = L.user(1)
    raw["sourceEventSeqs"] = None
    assert_rejected([L.user(0), raw], "must be an array")


def test_seqs_must_be_contiguous(log_builder):
    L = log_builder
    events = [event_from_json(r) for r in [L.raw("turn/start", 0), L.raw("turn/end", 2)]]
    with pytest.raises(SurfaceError, match="session event seq 2 is not contiguous; expected 1"):
        fold(events)


def test_surface_markers_are_required_exactly_on_surface_types(log_builder):
    L = log_builder
    assert_rejected([L.user(0, op=None)], "requires a surfaceOp marker")
    for kind in ("assistant/message", "tool/result", "context/message", "steering/message"):
        assert_rejected([L.raw(kind, 0, {})], "requires a surfaceOp marker")
    assert_rejected([L.raw("turn/start", 0, op="append")], "cannot carry surfaceOp")
    assert_rejected([L.raw("turn/start", 0, sources=[])], "cannot carry sourceEventSeqs")
    assert_rejected([L.user(0), L.raw("assistant/chunk", 1, sources=[0])], "cannot carry sourceEventSeqs")
    # A carried null counts as carried.
    for key in ("surfaceOp", "sourceEventSeqs"):
        raw = L.raw("turn/start", 0)
        raw[key] = None
        assert_rejected([raw], f"cannot carry {key}")


@pytest.mark.parametrize(
    "op",
    [
        None,
        "replace",
        "Append",
        ["append"],
        {"op": "replace", "start": 0},
        {"op": "replace", "start": 0, "end": 0, "extra": 1},
        {"op": "splice", "start": 0, "end": 0},
        {"op": "replace", "start": -1, "end": 0},
        {"op": "replace", "start": "0", "end": 0},
        {"op": "replace", "start": 0, "end": 0.0},
        {"op": "replace", "start": True, "end": 0},
    ],
)
def test_invalid_surface_ops(log_builder, op):
    L = log_builder
    raw = L.user(1, sources=[0])
    raw["surfaceOp"] = op
    assert_rejected([L.user(0), raw], "surfaceOp")


def test_only_an_assistant_message_may_have_empty_provenance(log_builder):
    L = log_builder
    assert surface_of([L.raw("turn/start", 0), L.assistant(1, sources=[])]) == (1,)
    assert_rejected([L.raw("turn/start", 0), L.raw("tool/result", 1, {}, op="append", sources=[])], "must not be empty")


def _tool_log(L, **meta):
    result = L.tool_result_data("call-1", "long output", **meta)
    return [
        L.raw("turn/start", 0),
        L.user(1),
        L.assistant(2),
        L.raw("tool/call", 3, {"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": "{}"}),
        L.raw("tool/result", 4, result, op="append", sources=[3]),
        L.raw("tool/result", 5, L.tool_result_data("call-2", "other"), op="append", sources=[3]),
    ]


def test_a_tool_result_rewrite_replaces_one_current_result_and_changes_only_its_content(log_builder):
    L = log_builder
    raws = _tool_log(L, meta={"bytes": [1, 2, {"k": None}]}, error=None)
    original = raws[4]["data"]

    pruned = {**original, "content": [L.text("[pruned]")]}
    assert surface_of([*raws, L.raw("tool/result", 6, pruned, op=L.replace(4, 4), sources=[4])]) == (
        1,
        2,
        6,
        5,
    )

    assert_rejected(
        [*raws, L.raw("tool/result", 6, pruned, op=L.replace(4, 5), sources=[4, 5])],
        "must rewrite exactly one current node",
    )
    assert_rejected(
        [*raws, L.raw("tool/result", 6, pruned, op=L.replace(1, 1), sources=[1])],
        "must target a current tool/result",
    )
    for change in (
        {"callId": "call-9"},
        {"isError": True},
        {"isError": 0},  # JSON false is not 0, although False == 0 in Python
        {"meta": {"bytes": [True, 2, {"k": None}]}},
        {"turn": 2},
        {"meta": {"bytes": [1, 2, {"k": 0}]}},
        {"meta": {"bytes": [2, 1, {"k": None}]}},
        {"error": {"name": "E", "code": "X"}},
        {"extra": 1},
    ):
        changed = {**pruned, **change}
        assert_rejected(
            [*raws, L.raw("tool/result", 6, changed, op=L.replace(4, 4), sources=[4])],
            "may change only content",
        )
    dropped = {k: v for k, v in pruned.items() if k != "meta"}
    assert_rejected(
        [*raws, L.raw("tool/result", 6, dropped, op=L.replace(4, 4), sources=[4])], "may change only content"
    )
    # A meta whose keys were written in another order is structurally equal.
    reordered = {**pruned, "meta": {"bytes": [1, 2, {"k": None}]}}
    assert surface_of([*raws, L.raw("tool/result", 6, reordered, op=L.replace(4, 4), sources=[4, 3])]) == (
        1,
        2,
        6,
        5,
    )


def test_an_empty_assistant_message_derives_no_message(log_builder):
    L = log_builder
    session = Session(header(), L.events([L.user(0, "question"), L.assistant(1, None), L.assistant(2, "answer")]))
    assert session.surface.nodes == [0, 1, 2]
    assert derive_event_message(session.event(1)) is None
    assert [m["role"] for m in session.derive_messages()] == ["user", "assistant"]
    assert session.derive_messages()[1]["content"] == [L.text("answer")]


def test_context_meta_is_hidden_from_the_model(log_builder):
    L = log_builder
    data = {"content": [L.text("ctx")], "source": {"kind": "plugin", "plugin": "p"}, "meta": {"secret": 1}}
    session = Session(header(), L.events([L.raw("context/message", 0, data, op="append")]))
    assert session.derive_messages() == [{"role": "user", "content": [L.text("ctx")]}]
    assert session.event(0).data["meta"] == {"secret": 1}


def test_projection_of_every_surface_type(log_builder):
    L = log_builder
    steering = {**L.user_data("steer"), "turn": 1, "envelope": {"displayContent": [], "prefixContexts": []}}
    raws = [
        L.raw("steering/message", 0, steering, op="append"),
        L.raw("tool/result", 1, L.tool_result_data("c", "out", error={"name": "E", "code": "C"}), op="append"),
        L.raw(
            "assistant/message",
            2,
            L.assistant_data("a", usage={"inputTokens": 1, "outputTokens": 2}),
            op="append",
        ),
    ]
    session = Session(header(), L.events(raws))
    assert session.derive_messages() == [
        {"role": "user", "content": [L.text("steer")]},
        {
            "role": "user",
            "content": [{"type": "tool-result", "toolCallId": "c", "content": [L.text("out")], "isError": False}],
        },
        {"role": "assistant", "content": [L.text("a")], "provenance": L.PROVENANCE},
    ]


def test_an_enveloped_prompt_sends_its_baked_content_and_displays_what_was_typed(log_builder):
    L = log_builder
    baked = [L.text("<context>snapshot</context>"), L.text("\n\n## My request:\n"), L.text("do it")]
    data = {
        "content": baked,
        "source": L.USER,
        "envelope": {
            "displayContent": [L.text("do it")],
            "prefixContexts": [{"source": {"kind": "plugin", "plugin": "x"}}],
        },
    }
    session = Session(header(), L.events([L.raw("user/message", 0, data, op="append")]))
    assert session.derive_messages() == [{"role": "user", "content": baked}]
    assert display_prompt_content(session.event(0).data) == [L.text("do it")]
    assert display_prompt_content(L.user_data("plain")) == [L.text("plain")]


def test_reseeding_reproduces_messages_and_a_replace_bumps_the_generation(log_builder):
    L = log_builder
    session = Session(header("a"))
    for raw in [L.raw("turn/start", 0), L.user(1, "one"), L.assistant(2, "two"), L.user(3, "three")]:
        session.append_raw(raw)
    assert session.surface.replace_generation == 0
    copy = Session(header("b"), session.events)
    assert copy.derive_messages() == session.derive_messages()
    session.append_raw(L.user(4, "summary", op=L.replace(1, 2), sources=[1, 2]))
    assert session.surface.replace_generation == 1
    assert session.surface.nodes == [4, 3]
    assert Session(header("c"), session.events).derive_messages() == session.derive_messages()
    assert [m["content"][0]["text"] for m in session.derive_messages()] == ["summary", "three"]


# -- derived-message cache -----------------------------------------------------------------------


def test_derive_messages_projects_each_node_once_and_rebuilds_after_a_replace(log_builder, monkeypatch):
    L = log_builder
    projected: list[int] = []

    def counting(event):
        projected.append(event.seq)
        return derive_event_message(event)

    monkeypatch.setattr(session_module, "derive_event_message", counting)
    session = Session(header())
    session.append_raw(L.user(0, "a"))
    session.append_raw(L.assistant(1, None))
    first = session.derive_messages()
    assert projected == [0, 1]
    session.append_raw(L.user(2, "b"))
    second = session.derive_messages()
    assert projected == [0, 1, 2]  # only the new node; the empty assistant is not projected again
    assert second is not first
    assert second[0] is first[0]  # shared message objects, a new list
    second.append({"role": "user", "content": []})
    assert len(session.derive_messages()) == 2  # mutating a returned list does not reach the cache
    assert projected == [0, 1, 2]

    session.append_raw(L.user(3, "summary", op=L.replace(0, 1), sources=[0, 1]))
    third = session.derive_messages()
    assert projected == [0, 1, 2, 3, 2]  # a replace rebuilds from the head
    assert [m["content"][0]["text"] for m in third] == ["summary", "b"]
    assert session.derive_messages() == third
    assert projected == [0, 1, 2, 3, 2]


# -- classification: current, shadowed or log-only -----------------------------------------------


def test_events_classify_as_current_shadowed_or_log_only(log_builder):
    L = log_builder
    raws = [
        L.raw("turn/start", 0),
        L.raw("step/start", 1),
        L.user(2),
        L.chunk(3),
        L.assistant(4, op=L.replace(2, 2), sources=[2]),
    ]
    classes = classify([event_from_json(r) for r in raws])
    assert [classes[s] for s in (2, 3, 4)] == ["shadowed", "log-only", "current"]
    assert classes[0] == classes[1] == "log-only"


def test_a_replacement_replaced_later_is_shadowed(log_builder):
    L = log_builder
    raws = [
        L.user(0),
        L.user(1),
        L.assistant(2, op=L.replace(0, 0), sources=[0]),
        L.assistant(3, op=L.replace(2, 1), sources=[2, 1]),
        L.chunk(4),
    ]
    classes = classify([event_from_json(r) for r in raws])
    assert classes == {0: "shadowed", 1: "shadowed", 2: "shadowed", 3: "current", 4: "log-only"}


def test_a_compaction_checkpoint_shadows_the_range_it_replaces(log_builder):
    L = log_builder
    raws = [L.raw("turn/start", 0), L.user(1)]
    for seq in range(2, 12):
        raws.append(L.user(seq) if seq in (5, 7, 11) else L.chunk(seq))
    summary = {"summary": [L.text("s")], "shadowedRange": {"start": 1, "end": 7}, "shadowedSeqs": [1, 5, 7]}
    raws += [
        L.raw("compact/start", 12, {"turn": 1}),
        L.raw("compact/summary", 13, summary),
        L.raw(
            "user/message",
            14,
            L.user_data("framed", {"kind": "plugin", "plugin": "compact"}),
            op=L.replace(1, 7),
            sources=[12, 13, 1, 5, 7],
        ),
        L.raw("compact/end", 15, {"turn": 1}),
    ]
    assert surface_of(raws) == (14, 11)
    classes = classify([event_from_json(r) for r in raws])
    assert [classes[s] for s in (1, 5, 7)] == ["shadowed"] * 3
    assert [classes[s] for s in (12, 13, 15)] == ["log-only"] * 3


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_logs_fold_like_a_naive_model(log_builder, data):
    raws, expected, generation = log_builder.draw_log(data.draw)
    assert surface_of(raws) == tuple(expected)
    assert fold([event_from_json(r) for r in raws]).replace_generation == generation


# -- request headers -----------------------------------------------------------------------------


def test_the_canonical_header_drops_empty_optional_parts():
    config = {"provider": "p", "model": "m"}
    assert canonical_header({"config": config, "system": "", "tools": [], "messagePrefix": []}) == {"config": config}
    full = {"config": {**config, "temperature": 0.5}, "system": "sys", "tools": [{"name": "a"}]}
    assert canonical_header(full) == full


def test_header_equality_is_sensitive_to_tool_order_and_config():
    config = {"provider": "p", "model": "m"}
    a = {"config": config, "tools": [{"name": "a"}, {"name": "b"}]}
    b = {"config": config, "tools": [{"name": "b"}, {"name": "a"}]}
    assert header_equals(a, dict(a))
    assert not header_equals(a, b)
    assert not header_equals(a, {"config": config})
    assert not header_equals({"config": config}, {"config": {**config, "temperature": 0}})
    assert not header_equals({"config": config}, {"config": config, "system": "x"})
    assert not header_equals({"config": config}, None)
    assert header_equals(None, None)
    # A tool schema whose keys moved counts as a change.
    assert not header_equals(
        {"config": config, "tools": [{"name": "a", "description": "d"}]},
        {"config": config, "tools": [{"description": "d", "name": "a"}]},
    )


def test_the_latest_request_header_snapshot_wins(log_builder):
    L = log_builder
    h1 = {"config": {"provider": "p", "model": "m1"}, "system": ""}
    h2 = {"config": {"provider": "p", "model": "m2"}, "tools": []}
    raws = [
        L.raw("request/header", 0, {"header": h1, "reason": "initial"}),
        L.raw("turn/start", 1),
        L.raw("request/header", 2, {"header": h2, "reason": "change"}),
    ]
    events = [event_from_json(r) for r in raws]
    assert fold_request_header(events) == h2
    assert fold_request_header(events[:2]) == h1
    assert fold_request_header([]) is None
    session = Session(header())
    assert session.request_header() is None
    session.append_raw(raws[0])
    assert session.request_header() == {"config": {"provider": "p", "model": "m1"}}
    session.append_raw(raws[1])
    session.append_raw(raws[2])
    assert session.request_header() == {"config": {"provider": "p", "model": "m2"}}
