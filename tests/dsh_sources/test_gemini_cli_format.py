"""Gemini CLI's session files projected to a dsh surface: every layout, as Gemini itself would resume it.

The test data (`data/gemini_cli/`, its README names the writer's source each file follows) holds
one project folder per layout; the builder (`gemini_builders.GeminiChat`) makes the cases one
test needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_sources.formats.gemini_cli import ACKNOWLEDGEMENT, GeminiCliFormat, read_session
from dsh_sources.reading import read_file, read_whole
from tests.dsh_sources.builders import BASE_MS, iso
from tests.dsh_sources.conftest import tree_state
from tests.dsh_sources.gemini_builders import GeminiChat, project_hash, slug_folder

DATA = Path(__file__).with_name("data") / "gemini_cli" / ".gemini"


def shown(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    transcript = read_session(str(path))
    assert transcript is not None
    return [("checkpoint" if m.source == COMPACT_CHECKPOINT_SOURCE else m.role, m.texts) for m in transcript.messages]


def project(tmp_path: Path) -> Path:
    return slug_folder(tmp_path / ".gemini", "/work/p", "p")


def test_every_layout_of_the_test_data_reads_as_gemini_would_resume_it():
    before = tree_state(DATA)
    fmt = GeminiCliFormat(DATA)
    read = {Path(path).name: read_whole(fmt, path) for path in fmt.files()}
    assert tree_state(DATA) == before
    # Subagent sessions nested under their parent are not listed; the legacy one in chats/ holds no session.
    assert sorted(read) == [
        "session-2025-11-02T00-00-11111111.json",
        "session-2025-12-22T00-00-22222222.json",
        "session-2025-12-22T00-00-22222222.jsonl",
        "session-2025-12-22T00-00-33333333.json",
        "session-2026-01-21T00-00-44444444.jsonl",
        "session-2026-07-20T00-00-66666666.jsonl",
        "session-2026-07-21T00-00-77777777.jsonl",
        "session-2026-07-21T00-00-88888888.json",
    ]
    assert sorted(name for name, t in read.items() if t is None) == [
        "session-2025-12-22T00-00-33333333.json",  # kind: subagent
        "session-2026-07-21T00-00-77777777.jsonl",  # only the start-up context and an info record
        "session-2026-07-21T00-00-88888888.json",  # not a JSON object
    ]
    hashed = read["session-2025-11-02T00-00-11111111.json"]
    assert hashed is not None and hashed.cwd is None and hashed.title == "Fix the arm64 build"
    assert [m.texts for m in hashed.messages] == [
        ("why does the build fail on arm64?",),
        ("The linker flags assume x86-64.",),
        ("Dropping `-m64` fixes it.",),
    ]
    twin = read["session-2025-12-22T00-00-22222222.jsonl"]
    legacy = read["session-2025-12-22T00-00-22222222.json"]
    assert twin is not None and legacy is not None and twin.agent_id == legacy.agent_id
    assert twin.updated_at > legacy.updated_at and len(twin.messages) == 4 and twin.cwd == "/work/parser"
    assert twin.messages[0].texts == ("rename the tokenizer in @src/lexer.py",)  # displayContent, not the expansion
    registered = read["session-2026-01-21T00-00-44444444.jsonl"]
    assert registered is not None and registered.cwd == "/work/registered"
    assert registered.title == "list the failing tests"
    assert [m.texts[0] for m in registered.messages] == [
        "list the failing tests",
        "Three tests fail: a, b and c.",
        "fix them instead",
        "Fixed all three.",
    ]
    modern = read["session-2026-07-20T00-00-66666666.jsonl"]
    assert modern is not None and modern.skipped == 2 and modern.title == "Speed up the importer"
    assert modern.messages[0].source == COMPACT_CHECKPOINT_SOURCE
    assert "now takes 4.1s" in modern.messages[0].texts[0]
    assert [m.texts[0] for m in modern.messages[1:]] == [
        "speed it up",
        "Switched to a streaming parser: 4.1s.",
        "thanks",
        "You are welcome.",
    ]


def test_a_message_appended_again_under_its_id_replaces_the_earlier_copy_where_it_stands(tmp_path):
    c = GeminiChat()
    c.user("first")
    reply = c.gemini("")
    c.user("second")
    c.raw({**c.messages[reply], "content": "filled in later"})
    assert shown(c.write(project(tmp_path))) == [
        ("user", ("first",)),
        ("assistant", ("filled in later",)),
        ("user", ("second",)),
    ]


def test_rewind_drops_the_message_and_everything_after_it_and_an_unknown_id_drops_all(tmp_path):
    c = GeminiChat()
    c.user("keep")
    gone = c.user("drop")
    c.gemini("dropped too")
    c.rewind(gone)
    c.user("after")
    assert shown(c.write(project(tmp_path))) == [("user", ("keep",)), ("user", ("after",))]
    c.raw({"$rewindTo": "no-such-id"})
    c.user("alone")
    assert shown(c.write(project(tmp_path))) == [("user", ("alone",))]


def test_replaced_history_shows_text_parts_only(tmp_path):
    c = GeminiChat()
    c.session_context()
    history = [
        {"id": "u1", "timestamp": iso(BASE_MS + 5), "type": "user", "content": [{"text": "explain"}]},
        {
            "id": "g1",
            "timestamp": iso(BASE_MS + 6),
            "type": "gemini",
            "content": [
                {"text": "thinking aloud", "thought": True},
                {"functionCall": {"name": "read_file", "args": {}}},
                {"text": "Here is why."},
            ],
            "toolCalls": [{"id": "c", "name": "read_file", "status": "success"}],
            "thoughts": [{"subject": "s", "description": "d"}],
        },
        {"id": "u2", "timestamp": iso(BASE_MS + 7), "type": "user", "content": [{"functionResponse": {"id": "c"}}]},
        {"id": "u3", "timestamp": iso(BASE_MS + 8), "type": "user", "content": [{"text": "<hook_context>x"}]},
        {"id": "u4", "timestamp": iso(BASE_MS + 9), "type": "user", "content": "/stats"},
        {"id": "g2", "timestamp": iso(BASE_MS + 10), "type": "gemini", "content": [{"text": ACKNOWLEDGEMENT}]},
        {"id": "i1", "timestamp": iso(BASE_MS + 11), "type": "error", "content": "quota"},
    ]
    c.replace_history(history)
    # The acknowledgement is left out only right after a compression's summary.
    assert shown(c.write(project(tmp_path))) == [
        ("user", ("explain",)),
        ("assistant", ("Here is why.",)),
        ("assistant", (ACKNOWLEDGEMENT,)),
    ]


def test_a_compression_becomes_a_checkpoint_and_what_it_replaced_leaves(tmp_path):
    c = GeminiChat()
    c.session_context()
    c.user("one")
    c.gemini("reply one")
    c.user("two")
    c.gemini("reply two")
    c.compress("we did one and two", keep=0)
    c.user("three")
    out = shown(c.write(project(tmp_path)))
    assert out[0][0] == "checkpoint" and "we did one and two" in out[0][1][0]
    assert out[1:] == [("user", ("three",))]


def test_title_is_the_summary_else_the_first_prompt_shortened(tmp_path):
    c = GeminiChat()
    c.user("/help")
    c.user("a very long first prompt " * 10)
    c.gemini("ok")
    path = c.write(project(tmp_path))
    transcript = read_session(str(path))
    assert transcript is not None and transcript.title is not None
    assert transcript.title.startswith("a very long first prompt") and len(transcript.title) <= 80
    c.summary("  Short\nsummary ")
    transcript = read_session(str(c.write(project(tmp_path))))
    assert transcript is not None and transcript.title == "Short summary"


def test_times_come_from_the_metadata(tmp_path):
    c = GeminiChat(at=BASE_MS)
    c.user("q")
    c.gemini("a")
    transcript = read_session(str(c.write(project(tmp_path))))
    assert transcript is not None
    assert (transcript.created_at, transcript.updated_at) == (BASE_MS, c.clock)


@pytest.mark.parametrize(
    ("content", "skipped"),
    [("[1, 2]", 1), ('{"sessionId": "x", "messages": [', 1), ("", 0), ('"text"', 1)],
    ids=["array", "cut-short", "empty", "string"],
)
def test_a_legacy_file_that_is_not_a_json_object_is_skipped_and_counted(tmp_path, content, skipped):
    path = project(tmp_path) / "chats" / "session-2026-01-01T00-00-abcdefgh.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    fmt = GeminiCliFormat(tmp_path / ".gemini")
    assert read_whole(fmt, str(path)) is None
    assert read_file(fmt, str(path), None, None).skipped == skipped


def test_where_the_cwd_comes_from(tmp_path):
    base = tmp_path / ".gemini"
    fmt = GeminiCliFormat(base)
    marked = slug_folder(base, "/work/marked", "marked")
    registered = slug_folder(base, "/work/registered", "registered", marker=False, registry=True)
    hashed = base / "tmp" / project_hash("/work/registered")
    unknown = base / "tmp" / project_hash("/work/unknown")
    relative = slug_folder(base, "not/absolute", "relative")
    cwd = {
        folder.name: fmt.cwd_of(str(folder / "chats" / "session-x.jsonl"))
        for folder in (marked, registered, hashed, unknown, relative)
    }
    assert list(cwd.values()) == ["/work/marked", "/work/registered", "/work/registered", None, None]
    (base / "projects.json").write_text("{not json")
    assert GeminiCliFormat(base).cwd_of(str(registered / "chats" / "x.jsonl")) is None


def test_files_are_the_session_files_directly_in_chats_and_locate_finds_one_by_id(tmp_path):
    c = GeminiChat()
    c.user("q")
    folder = project(tmp_path)
    path = c.write(folder)
    (folder / "chats" / "notes.json").write_text("{}")
    (folder / "chats" / c.session_id).mkdir()
    (folder / "chats" / c.session_id / "session-nested.jsonl").write_text("{}")
    fmt = GeminiCliFormat(tmp_path / ".gemini")
    assert list(fmt.files()) == [str(path)]
    assert fmt.locate(c.session_id) == [str(path)]
    assert fmt.locate("short") == [] and fmt.locate("../../x/y") == []
    assert list(GeminiCliFormat(tmp_path / "missing").files()) == []


def test_a_jsonl_metadata_line_needs_its_project_hash(tmp_path):
    path = project(tmp_path) / "chats" / "session-2026-01-01T00-00-abcdefgh.jsonl"
    path.parent.mkdir(parents=True)
    record = {"id": "m", "timestamp": iso(BASE_MS), "type": "user", "content": "hi"}
    path.write_text(json.dumps({"sessionId": "abcdefgh-1"}) + "\n" + json.dumps(record) + "\n")
    assert read_session(str(path)) is None
