"""Codex CLI's rollouts projected to a dsh surface: the model-visible history as Codex rebuilds it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_sources.formats.codex import UNREADABLE_SUMMARY, CodexFormat, read_rollout
from tests.dsh_sources.builders import BASE_MS, CodexRollout


def shown(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    transcript = read_rollout(str(path))
    assert transcript is not None
    return [("checkpoint" if m.source == COMPACT_CHECKPOINT_SOURCE else m.role, m.texts) for m in transcript.messages]


def started(**kwargs) -> CodexRollout:
    rollout = CodexRollout(**kwargs)
    rollout.meta()
    rollout.context()
    rollout.turn_context()
    return rollout


def test_the_conversation_comes_from_response_items_not_their_ui_copies(tmp_path):
    r = started()
    r.user("fix the bug")
    r.tool_call()
    r.assistant("I will look first.", phase="commentary")
    r.token_count()
    r.assistant("Fixed.")
    assert shown(r.write(tmp_path)) == [
        ("user", ("fix the bug",)),
        ("assistant", ("I will look first.",)),
        ("assistant", ("Fixed.",)),
    ]


def test_developer_messages_and_injected_context_are_left_out(tmp_path):
    r = started()
    r.raw({"timestamp": "2026-01-01T00:01:00.000Z", "type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<user_shell_command>ls</user_shell_command>"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            {"type": "input_text", "text": "what is in this picture?"},
        ]}})  # fmt: skip
    assert shown(r.write(tmp_path)) == [("user", ("what is in this picture?",))]


def test_a_compaction_replaces_the_history_before_it_with_a_checkpoint(tmp_path):
    r = started()
    r.user("first")
    r.assistant("first answer")
    r.user("second")
    r.assistant("second answer")
    r.compacted("we fixed two bugs", kept_prompts=["first", "second"])
    r.user("third")
    r.assistant("third answer")
    out = shown(r.write(tmp_path))
    assert out[:2] == [("user", ("first",)), ("user", ("second",))]
    kind, (summary,) = out[2]
    assert kind == "checkpoint" and summary.endswith("we fixed two bugs")
    assert out[3:] == [("user", ("third",)), ("assistant", ("third answer",))]


def test_an_older_compaction_keeps_the_prompts_and_the_summary(tmp_path):
    r = started()
    r.user("first")
    r.assistant("first answer")
    r.legacy_compacted("summary of first")
    r.user("next")
    assert shown(r.write(tmp_path)) == [
        ("user", ("first",)),
        ("checkpoint", ("summary of first",)),
        ("user", ("next",)),
    ]


def test_a_remote_compaction_is_a_checkpoint_saying_its_summary_is_unreadable(tmp_path):
    r = started()
    r.user("secret plans")
    r.assistant("noted")
    r.remote_compacted(kept_prompts=["secret plans"])
    r.user("continue")
    assert shown(r.write(tmp_path)) == [
        ("user", ("secret plans",)),
        ("checkpoint", (UNREADABLE_SUMMARY,)),
        ("user", ("continue",)),
    ]


def test_a_rollback_drops_the_last_user_turns(tmp_path):
    r = started()
    for n in range(1, 4):
        r.user(f"turn {n}")
        r.assistant(f"answer {n}")
    r.rollback(2)
    r.user("turn 4")
    assert shown(r.write(tmp_path)) == [("user", ("turn 1",)), ("assistant", ("answer 1",)), ("user", ("turn 4",))]
    r.rollback(9)
    assert shown(r.write(tmp_path)) == []


def test_a_forked_rollout_carries_its_parents_history_after_its_own_meta(tmp_path):
    parent = str(uuid.uuid4())
    r = CodexRollout()
    r.meta(forked_from=parent)
    r.meta(session_id=parent)  # the parent's meta and history, copied in
    r.user("parent question")
    r.assistant("parent answer")
    r.user("fork question")
    transcript = read_rollout(str(r.write(tmp_path)))
    assert transcript is not None and transcript.agent_id == r.session_id
    assert [m.texts for m in transcript.messages] == [("parent question",), ("parent answer",), ("fork question",)]


def test_a_resumed_rollout_goes_on_in_the_same_file(tmp_path):
    r = started()
    r.user("before")
    r.assistant("a")
    r.turn_context(model="gpt-5.2")
    r.user("after resume")
    r.assistant("b")
    transcript = read_rollout(str(r.write(tmp_path)))
    assert transcript is not None
    assert [m.texts for m in transcript.messages] == [("before",), ("a",), ("after resume",), ("b",)]
    assert transcript.messages[-1].model == "gpt-5.2"


def test_subagent_rollouts_and_files_without_a_meta_are_no_sessions(tmp_path):
    sub = CodexRollout()
    sub.meta(source={"subagent": {"thread_spawn": {"parent_thread_id": str(uuid.uuid4()), "depth": 1}}})
    sub.user("delegated")
    assert read_rollout(str(sub.write(tmp_path))) is None
    bare = CodexRollout()
    bare.user("no meta")
    assert read_rollout(str(bare.write(tmp_path / "other"))) is None


def test_title_id_cwd_and_times(tmp_path):
    r = started(cwd="/srv/app")
    r.user("the very first prompt")
    path = r.write(tmp_path)
    transcript = read_rollout(str(path))
    assert transcript is not None
    assert (transcript.agent_id, transcript.cwd, transcript.title) == (
        r.session_id,
        "/srv/app",
        "the very first prompt",
    )
    assert transcript.created_at == BASE_MS
    r.thread_name("Named thread")
    assert read_rollout(str(r.write(tmp_path))).title == "Named thread"


def test_thread_names_kept_beside_the_rollouts_are_titles(tmp_path):
    fmt = CodexFormat(tmp_path)
    assert fmt.titles() == {}
    lines = [{"id": "a", "thread_name": "Old", "updated_at": "x"}, {"id": "a", "thread_name": "New"}, {"id": "b"}]
    (tmp_path / "session_index.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + "{cut")
    assert fmt.titles() == {"a": "New"}


def test_rollouts_are_found_in_sessions_and_archived_sessions(tmp_path):
    live, archived = started(), started()
    paths = {str(live.write(tmp_path)), str(archived.write(tmp_path, archived=True))}
    (tmp_path / "sessions" / "2026" / "01" / "01" / "notes.jsonl").write_text("{}\n")
    assert set(CodexFormat(tmp_path).files()) == paths
    assert list(CodexFormat(tmp_path / "missing").files()) == []


def test_an_assistant_message_of_only_whitespace_is_no_message(tmp_path):
    r = started()
    r.user("fix the bug")
    r.assistant("\n\n", phase="commentary")
    r.tool_call()
    r.assistant("Fixed.")
    assert shown(r.write(tmp_path)) == [("user", ("fix the bug",)), ("assistant", ("Fixed.",))]
