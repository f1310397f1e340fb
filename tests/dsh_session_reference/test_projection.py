"""Projecting a surface snapshot to the conversation a reference shows the model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given
from hypothesis import strategies as st

from dsh_host import SessionHeader, SurfaceText
from dsh_host.text import join_surrogate_pairs
from dsh_retention import utf8_length
from dsh_session_reference.frame import build_meta
from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.projection import ProjectedMessage, ProjectedSource, project_surface, project_texts
from dsh_session_reference.retention import retain_source
from tests.dsh_session_reference.conftest import COMPACT, DELIMITER, FIXTURE_SURFACE_SEQS, GOAL, conversation

if TYPE_CHECKING:
    from dsh_host.testing import LogBuilder

CHECKPOINT_TEXT = "<compacted-summary>checkpoint</compacted-summary>"


def fixture_projection(log_builder: type[LogBuilder]) -> ProjectedSource:
    surface = log_builder.surface(conversation(), FIXTURE_SURFACE_SEQS)
    return project_surface(log_builder.header("source", cwd="/source"), 13, surface)


def test_a_surface_projects_to_human_checkpoint_and_assistant_text(log_builder: type[LogBuilder]) -> None:
    assert fixture_projection(log_builder) == ProjectedSource.of(
        "source",
        "/source",
        13,
        (
            ProjectedMessage("user", CHECKPOINT_TEXT, checkpoint=True),
            ProjectedMessage("user", "recent user"),
            ProjectedMessage("user", "human steer"),
            ProjectedMessage("assistant", "visible answer"),
        ),
    )


def test_the_meta_of_a_projection_is_exact_json(log_builder: type[LogBuilder]) -> None:
    retained = retain_source(fixture_projection(log_builder), "source", 65536)
    assert js_stringify(build_meta([retained])) == (
        '{"kind":"session-reference","version":1,"references":[{"sessionId":"source","label":"source",'
        '"capturedThroughSeq":13,"compacted":true,"originalMessages":4,"retainedMessages":4,'
        '"omittedMessages":0,"omittedBytes":0,"truncated":false,"inputIndex":0}]}'
    )


def test_a_prompt_with_a_baked_snapshot_contributes_only_its_display_content(log_builder: type[LogBuilder]) -> None:
    envelope = {
        "displayContent": [log_builder.text("direct source question")],
        "prefixContexts": [
            {
                "source": {"kind": "plugin", "plugin": "session-reference"},
                "meta": {"kind": "session-reference"},
            }
        ],
    }
    content = [
        log_builder.text("nested snapshot text"),
        log_builder.text(DELIMITER),
        log_builder.text("direct source question"),
    ]
    projected = project_surface(
        log_builder.header("source", cwd=None), 0, [log_builder.user(0, content, envelope=envelope)]
    )
    assert projected.messages == (ProjectedMessage("user", "direct source question"),)


def test_steering_envelopes_are_honoured_too(log_builder: type[LogBuilder]) -> None:
    event = log_builder.steering(0, "baked")
    event["data"]["envelope"] = {"displayContent": [log_builder.text("shown")], "prefixContexts": []}
    assert project_surface(log_builder.header("s", cwd=None), 0, [event]).messages == (
        ProjectedMessage("user", "shown"),
    )


def test_only_user_messages_can_be_checkpoints(log_builder: type[LogBuilder]) -> None:
    events = [
        log_builder.steering(0, "compact steering", source=COMPACT),
        log_builder.user(1, "summary", source=COMPACT),
    ]
    projected = project_surface(log_builder.header("s", cwd=None), 1, events)
    assert projected.messages == (ProjectedMessage("user", "summary", checkpoint=True),)
    assert projected.compacted


def test_checkpoint_recognition_ignores_extra_source_keys_and_text(log_builder: type[LogBuilder]) -> None:
    source = {"kind": "plugin", "plugin": "compact", "backend": "other"}
    projected = project_surface(log_builder.header("s", cwd=None), 0, [log_builder.user(0, "anything", source=source)])
    assert projected.messages == (ProjectedMessage("user", "anything", checkpoint=True),)


def test_other_sources_and_event_types_contribute_nothing(log_builder: type[LogBuilder]) -> None:
    events = [
        log_builder.user(0, "plugin user", source=GOAL),
        log_builder.user(1, "odd kind", source={"kind": "system"}),
        log_builder.steering(2, "plugin steer", source=GOAL),
        log_builder.context(3, "context", {"kind": "user"}),
        log_builder.tool_result(4, "tool output"),
        log_builder.chunk(5, "chunk"),
        log_builder.raw(
            "future/type", 6, {"content": [log_builder.text("x")], "source": {"kind": "user"}}, op="append"
        ),
    ]
    projected = project_surface(log_builder.header("s", cwd=None), 6, events)
    assert projected.messages == ()
    assert not projected.compacted


def test_text_blocks_are_joined_with_newlines_and_other_blocks_ignored(log_builder: type[LogBuilder]) -> None:
    content = [
        log_builder.text("a"),
        log_builder.reasoning("hidden"),
        {"type": "tool-call", "id": "1", "name": "read", "arguments": "{}"},
        {"type": "image", "data": "..."},
        {"type": "text", "text": 5},
        log_builder.text("b"),
    ]
    projected = project_surface(log_builder.header("s", cwd=None), 0, [log_builder.assistant(0, content)])
    assert projected.messages == (ProjectedMessage("assistant", "a\nb"),)


def test_empty_text_is_skipped_but_two_empty_blocks_join_to_a_newline(log_builder: type[LogBuilder]) -> None:
    events = [
        log_builder.user(0, [log_builder.text("")]),
        log_builder.user(1, []),
        log_builder.user(2, [log_builder.text(""), log_builder.text("")]),
    ]
    assert project_surface(log_builder.header("s", cwd=None), 2, events).messages == (ProjectedMessage("user", "\n"),)


def test_header_fields_pass_through(log_builder: type[LogBuilder]) -> None:
    projected = project_surface(log_builder.header("id", cwd=None), None, [])
    assert (projected.session_id, projected.cwd, projected.captured_through_seq) == ("id", None, None)


def test_surrogate_pairs_become_one_character(log_builder: type[LogBuilder]) -> None:
    projected = project_surface(log_builder.header("s", cwd=None), 0, [log_builder.user(0, "\ud83d\ude00 \ud800")])
    assert projected.messages[0].text == "😀 \ud800"


_KINDS = st.sampled_from(["user/message", "assistant/message", "steering/message", "context/message", "tool/result"])
_SOURCE_KINDS = st.sampled_from([None, "user", "plugin", "system"])
_PLUGINS = st.sampled_from([None, "compact", "session-reference"])
_ROW_TEXTS = st.text(st.sampled_from("ab<界😀\ud83d\ude00\ud800\n"), max_size=6)


def naive_projection(rows: list[SurfaceText]) -> list[ProjectedMessage]:
    """The projection rules applied one row at a time, pairs joined in every text."""
    out = []
    for kind, source_kind, plugin, text in rows:
        if not text:
            continue
        checkpoint = kind == "user/message" and (source_kind, plugin) == ("plugin", "compact")
        if kind == "assistant/message":
            out.append(ProjectedMessage("assistant", join_surrogate_pairs(text)))
        elif (kind in ("user/message", "steering/message") and source_kind == "user") or checkpoint:
            out.append(ProjectedMessage("user", join_surrogate_pairs(text), checkpoint))
    return out


@given(st.lists(st.builds(SurfaceText, _KINDS, _SOURCE_KINDS, _PLUGINS, _ROW_TEXTS), max_size=12))
def test_projected_columns_hold_the_messages_and_their_size(rows: list[SurfaceText]) -> None:
    projected = project_texts(SessionHeader(id="s", created_at=0), 3, rows)
    assert list(projected.messages) == naive_projection(rows)
    assert projected == ProjectedSource.of("s", None, 3, projected.messages)
    assert projected.text_bytes == sum(utf8_length(message.text) for message in projected.messages)
    assert projected.compacted is any(message.checkpoint for message in projected.messages)
