"""Projecting a surface snapshot to the conversation a reference shows the model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_session_reference.frame import build_meta
from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.projection import ProjectedMessage, ProjectedSource, project_surface
from dsh_session_reference.retention import retain_source

if TYPE_CHECKING:
    from conftest import LogBuilder

CHECKPOINT_TEXT = "<compacted-summary>checkpoint</compacted-summary>"


def fixture_projection(logs: LogBuilder) -> ProjectedSource:
    surface = logs.surface(logs.conversation(), logs.FIXTURE_SURFACE_SEQS)
    return project_surface(logs.Header("source", "/source"), 13, surface)


def test_p1_fixture_projects_human_checkpoint_and_assistant_text(logs: LogBuilder) -> None:
    assert fixture_projection(logs) == ProjectedSource(
        session_id="source",
        cwd="/source",
        captured_through_seq=13,
        messages=(
            ProjectedMessage("user", CHECKPOINT_TEXT, checkpoint=True),
            ProjectedMessage("user", "recent user"),
            ProjectedMessage("user", "human steer"),
            ProjectedMessage("assistant", "visible answer"),
        ),
    )


def test_p1_golden_meta(logs: LogBuilder) -> None:
    retained = retain_source(fixture_projection(logs), "source", 65536)
    assert js_stringify(build_meta([retained])) == (
        '{"kind":"session-reference","version":1,"references":[{"sessionId":"source","label":"source",'
        '"capturedThroughSeq":13,"compacted":true,"originalMessages":4,"retainedMessages":4,'
        '"omittedMessages":0,"omittedBytes":0,"truncated":false,"inputIndex":0}]}'
    )


def test_p2_prompt_with_baked_snapshot_contributes_only_its_display_content(logs: LogBuilder) -> None:
    envelope = {
        "displayContent": [logs.text("direct source question")],
        "prefixContexts": [
            {
                "source": {"kind": "plugin", "plugin": "session-reference"},
                "meta": {"kind": "session-reference"},
            }
        ],
    }
    content = [
        logs.text("nested snapshot text"),
        logs.text(logs.DELIMITER),
        logs.text("direct source question"),
    ]
    projected = project_surface(logs.Header("source"), 0, [logs.user(0, content, envelope=envelope)])
    assert projected.messages == (ProjectedMessage("user", "direct source question"),)


def test_steering_envelopes_are_honoured_too(logs: LogBuilder) -> None:
    event = logs.steering(0, "baked")
    event["data"]["envelope"] = {"displayContent": [logs.text("shown")], "prefixContexts": []}
    assert project_surface(logs.Header("s"), 0, [event]).messages == (ProjectedMessage("user", "shown"),)


def test_only_user_messages_can_be_checkpoints(logs: LogBuilder) -> None:
    events = [
        logs.steering(0, "compact steering", source=logs.COMPACT),
        logs.user(1, "summary", source=logs.COMPACT),
    ]
    projected = project_surface(logs.Header("s"), 1, events)
    assert projected.messages == (ProjectedMessage("user", "summary", checkpoint=True),)
    assert projected.compacted


def test_checkpoint_recognition_ignores_extra_source_keys_and_text(logs: LogBuilder) -> None:
    source = {"kind": "plugin", "plugin": "compact", "backend": "other"}
    projected = project_surface(logs.Header("s"), 0, [logs.user(0, "anything", source=source)])
    assert projected.messages == (ProjectedMessage("user", "anything", checkpoint=True),)


def test_other_sources_and_event_types_contribute_nothing(logs: LogBuilder) -> None:
    events = [
        logs.user(0, "plugin user", source=logs.GOAL),
        logs.user(1, "odd kind", source={"kind": "system"}),
        logs.steering(2, "plugin steer", source=logs.GOAL),
        logs.context(3, "context", {"kind": "user"}),
        logs.tool_result(4, "tool output"),
        logs.chunk(5, "chunk"),
        logs.event(6, "future/type", {"content": [logs.text("x")], "source": {"kind": "user"}}),
    ]
    projected = project_surface(logs.Header("s"), 6, events)
    assert projected.messages == ()
    assert not projected.compacted


def test_text_blocks_are_joined_with_newlines_and_other_blocks_ignored(logs: LogBuilder) -> None:
    content = [
        logs.text("a"),
        logs.reasoning("hidden"),
        {"type": "tool-call", "id": "1", "name": "read", "arguments": "{}"},
        {"type": "image", "data": "..."},
        {"type": "text", "text": 5},
        logs.text("b"),
    ]
    projected = project_surface(logs.Header("s"), 0, [logs.assistant(0, content)])
    assert projected.messages == (ProjectedMessage("assistant", "a\nb"),)


def test_empty_text_is_skipped_but_two_empty_blocks_join_to_a_newline(logs: LogBuilder) -> None:
    events = [
        logs.user(0, [logs.text("")]),
        logs.user(1, []),
        logs.user(2, [logs.text(""), logs.text("")]),
    ]
    assert project_surface(logs.Header("s"), 2, events).messages == (ProjectedMessage("user", "\n"),)


def test_header_fields_pass_through(logs: LogBuilder) -> None:
    projected = project_surface(logs.Header("id"), None, [])
    assert (projected.session_id, projected.cwd, projected.captured_through_seq) == ("id", None, None)


def test_surrogate_pairs_become_one_character(logs: LogBuilder) -> None:
    projected = project_surface(logs.Header("s"), 0, [logs.user(0, "\ud83d\ude00 \ud800")])
    assert projected.messages[0].text == "😀 \ud800"
