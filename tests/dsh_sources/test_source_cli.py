"""The two sources through the `dsh` command: list, search, show, export, import as a copy, check, refusals.

The agents' folders come from `CLAUDE_CONFIG_DIR` and `CODEX_HOME`, as on a person's machine, and
no command changes a byte or an mtime under them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.dsh_sources.conftest import tree_state

pytestmark = pytest.mark.foreign_logs  # an imported copy is a synthesized log (surface events, no turns)


@pytest.fixture
def agents(tmp_path: Path, dsh_cli):
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    dsh_cli.plugins = ["session-reference", "compact", "claude-code", "codex"]
    dsh_cli.env.update({"CLAUDE_CONFIG_DIR": str(claude), "CODEX_HOME": str(codex)})
    t = ClaudeTranscript(cwd=str(tmp_path))
    t.user("how should the rollout parser handle cut lines?")
    t.reply(("thinking", "hmm"), ("text", "Skip them and count them."))
    claude_path = t.write(claude, extra=['{"type": "user", "cut\n'])
    r = CodexRollout(cwd="/elsewhere")
    r.meta()
    r.context()
    r.user("rename the module")
    r.assistant("Renamed.")
    codex_path = r.write(codex)
    return {
        "claude": f"claude-code:{t.session_id}",
        "codex": f"codex:{r.session_id}",
        "paths": (claude_path, codex_path),
    }


def test_sessions_list_search_and_show_answer_from_both_sources(dsh_cli, agents):
    code, out, err = dsh_cli("sessions", "list", "--json")
    assert code == 0, err
    rows = {row["id"]: row for row in map(json.loads, out.splitlines())}
    assert rows[agents["claude"]]["source"] == "claude-code"
    assert rows[agents["codex"]]["title"] == "rename the module"
    code, out, _ = dsh_cli("sessions", "search", "count them")
    assert out.splitlines()[0].startswith(agents["claude"]) and "Skip them and count them." in out
    code, out, _ = dsh_cli("sessions", "show", agents["codex"])
    assert code == 0 and "user/message +  rename the module" in out and "assistant/message +  Renamed." in out


def test_an_export_imports_as_a_dsh_copy(dsh_cli, agents, tmp_path):
    exported = tmp_path / "export.jsonl"
    assert dsh_cli("sessions", "export", agents["claude"], "-o", str(exported)).exit_code == 0
    header, *events = map(json.loads, exported.read_text().splitlines())
    assert header["id"] == agents["claude"] and [e["seq"] for e in events] == [0, 1]
    code, out, err = dsh_cli("sessions", "import", str(exported))
    assert code == 0, err
    copy = out.split(" as ")[1].split(" ")[0]
    assert out.startswith(f"imported {agents['claude']} as ")
    code, out, _ = dsh_cli("sessions", "export", copy)
    copied_header, *copied = map(json.loads, out.splitlines())
    assert copied_header["parentSession"] == agents["claude"] and copied[:-1] == events
    title = copied[-1]  # the original's title (here its first prompt's), appended last
    assert (title["type"], title["seq"], title["data"]["title"]) == (
        "session/title",
        2,
        "how should the rollout parser handle cut lines?",
    )


def test_a_check_that_finds_nothing_counts_what_it_checked(dsh_cli, tmp_path):
    dsh_cli.plugins = ["claude-code", "codex"]
    dsh_cli.env.update({"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex")})
    for prompt in ("first", "second"):
        r = CodexRollout(cwd="/elsewhere")
        r.meta()
        r.user(prompt)
        r.write(tmp_path / "codex")
    assert dsh_cli("run", "hello").exit_code == 0
    code, out, err = dsh_cli("sessions", "check")
    assert (code, err) == (0, "") and re.fullmatch(
        r"1 session, 2 source files \(index [0-9.]+ KB\): no problems\n", out
    )


def test_check_reports_skipped_lines_per_source_file(dsh_cli, agents):
    claude_path, _ = agents["paths"]
    code, out, _ = dsh_cli("sessions", "check")
    assert code == 0
    assert out.splitlines() == [f"claude-code  {claude_path}  1 skipped line"]
    code, out, _ = dsh_cli("sessions", "check", "--source", "codex")
    assert (code, out) == (0, "1 source file: no problems\n")
    code, out, _ = dsh_cli("sessions", "check", agents["claude"], "--json")
    assert json.loads(out) == {
        "source": "claude-code",
        "path": str(claude_path),
        "session": agents["claude"],
        "skipped": 1,
        "oversized": 0,
    }
    code, _, err = dsh_cli("sessions", "check", "--source", "nope")
    assert code == 2 and "unknown source 'nope'" in err


def test_writing_to_a_source_session_is_refused_in_one_line(dsh_cli, agents):
    for args in (("compact", agents["claude"]), ("run", "more", "--session", agents["codex"])):
        code, _, err = dsh_cli(*args)
        assert code == 1
        (error,) = [line for line in err.splitlines() if line.startswith("dsh: error:")]
        assert "belongs to the read-only source" in error


def test_ref_candidates_rank_by_cwd_and_preview_frames_a_source_snapshot(dsh_cli, agents, tmp_path):
    code, out, err = dsh_cli("run", "hello")
    assert code == 0, err
    listing = [json.loads(line) for line in dsh_cli("sessions", "list", "--json").stdout.splitlines()]
    target_id = next(row["id"] for row in listing if "source" not in row)
    code, out, err = dsh_cli("ref", "candidates", "--target", target_id, "--json")
    assert code == 0, err
    assert [json.loads(line)["sessionId"] for line in out.splitlines()] == [agents["claude"], agents["codex"]]
    mention = dsh_cli("ref", "mention", agents["codex"], "--label", "codex chat").stdout.strip()
    code, out, err = dsh_cli("ref", "preview", "--target", target_id, f"see {mention}", "--json")
    assert code == 0, err
    (context,) = json.loads(out)["contexts"]
    text = context["content"][0]["text"]
    payload = json.loads(text.split("<referenced-sessions>\n")[1].split("\n</referenced-sessions>")[0])
    assert payload == [
        {
            "sessionId": agents["codex"],
            "label": "codex chat",
            "cwd": "/elsewhere",
            "capturedThroughSeq": 1,
            "conversation": [{"role": "user", "text": "rename the module"}, {"role": "assistant", "text": "Renamed."}],
        }
    ]


def test_nothing_under_the_agents_folders_is_ever_written(dsh_cli, agents, tmp_path):
    before = {name: tree_state(tmp_path / name) for name in ("claude", "codex")}
    for args in (
        ("sessions", "list"),
        ("sessions", "search", "parser"),
        ("sessions", "show", agents["claude"]),
        ("sessions", "export", agents["codex"]),
        ("sessions", "check"),
        ("compact", agents["claude"]),
    ):
        dsh_cli(*args)
    assert {name: tree_state(tmp_path / name) for name in ("claude", "codex")} == before
    assert (dsh_cli.home / "sources" / "index.sqlite3").is_file()


def test_missing_agent_folders_are_empty_sources(dsh_cli, tmp_path):
    dsh_cli.plugins = ["claude-code", "codex"]
    dsh_cli.env.update({"CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "CODEX_HOME": str(tmp_path / "none2")})
    assert dsh_cli("sessions", "list") == (0, "", "")


def test_show_prints_text_with_its_line_breaks_and_marks_a_checkpoint(dsh_cli, tmp_path):
    dsh_cli.plugins = ["compact", "claude-code"]
    dsh_cli.env.update({"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex")})
    t = ClaudeTranscript(cwd="/work")
    t.user("old question")
    t.reply(("text", "old answer"))
    t.compact("We chose JSON lines.\nNothing \x1b[31melse.")  # the transcript ends right after it
    t.write(tmp_path / "claude")
    session_id = f"claude-code:{t.session_id}"
    code, out, err = dsh_cli("sessions", "show", session_id)
    assert (code, err) == (0, "")
    header, *lines = out.splitlines()
    assert header.startswith(f"session {session_id}  agent Claude Code  created ")
    lead = "     0 user/message + checkpoint  "
    assert lines == [
        lead + "This session is being continued from a previous conversation that ran out of context. "
        "The conversation is summarized below:",
        " " * len(lead) + "We chose JSON lines.",
        " " * len(lead) + "Nothing \\x1b[31melse.",
    ]
    code, out, _ = dsh_cli("sessions", "show", session_id, "--json")
    (event,) = map(json.loads, out.splitlines())
    assert event["data"]["content"][0]["text"].endswith("below:\nWe chose JSON lines.\nNothing \x1b[31melse.")


@pytest.mark.parametrize("compacted", [False, True], ids=["plain", "compacted"])
def test_a_copy_of_a_claude_code_session_passes_the_check_and_keeps_its_title(dsh_cli, tmp_path, compacted):
    dsh_cli.plugins = ["compact", "session-reference", "claude-code"]
    dsh_cli.env.update({"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex")})
    t = ClaudeTranscript(cwd="/work")
    t.user("how are cut lines handled?")
    t.reply(("text", "Skipped and counted."))
    if compacted:
        t.compact("We chose JSON lines.")
    t.user("and long ones?")
    t.reply(("text", "Counted apart."))
    t.custom_title("Cut lines")
    t.write(tmp_path / "claude")
    exported = tmp_path / "export.jsonl"
    assert dsh_cli("sessions", "export", f"claude-code:{t.session_id}", "-o", str(exported)).exit_code == 0
    code, out, err = dsh_cli("sessions", "import", str(exported))
    assert code == 0, err
    copy = out.split(" as ")[1].split(" ")[0]

    code, out, err = dsh_cli("sessions", "check")
    assert (code, err) == (0, ""), out
    assert out.splitlines()[0].startswith(f"{copy}  seq -  note  transcript-copy  a copy of session claude-code:")
    code, out, _ = dsh_cli("sessions", "list")
    (line,) = [line for line in out.splitlines() if line.startswith(copy)]
    assert line.endswith("  Cut lines")
    # It reads as a session but is not one to go on with: resuming it is refused in one line.
    code, out, err = dsh_cli("run", "--session", copy, "go on")
    assert code != 0 and "resuming it is not supported" in err and len(err.splitlines()) == 1


def test_sessions_index_builds_on_purpose_and_says_what_it_read(dsh_cli, agents):
    code, out, err = dsh_cli("sessions", "index")
    assert (code, err) == (0, "")
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert sorted(lines) == ["claude-code", "codex"]
    assert all(
        line.startswith("1 of 1 changed files read") and line.endswith(", up to date") for line in lines.values()
    )
    code, out, _ = dsh_cli("sessions", "index")  # warm: nothing changed, nothing read
    assert code == 0 and all("0 of 0 changed files read" in line for line in out.splitlines())
    claude_path, _ = agents["paths"]
    with open(claude_path, "a", encoding="utf-8") as file:
        file.write("\n")  # the cut line is whole now (and still not JSON)
    code, out, _ = dsh_cli("sessions", "index")
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert lines["claude-code"].startswith("1 of 1 changed files read") and lines["codex"].startswith("0 of 0")


def test_a_configured_folder_that_does_not_exist_is_reported_and_a_default_one_is_not(dsh_cli, tmp_path):
    dsh_cli.plugins = ["session-reference", "claude-code", "codex"]
    missing = tmp_path / "no-such-claude"
    config = tmp_path / "dsh.toml"
    config.write_text(f'[sources.claude-code]\ndir = "{missing}"\n', encoding="utf-8")
    dsh_cli.env.update({"DSH_CONFIG": str(config), "CODEX_HOME": str(tmp_path / "no-codex-either")})
    line = f'dir = "{missing}" does not exist (set in [sources.claude-code]): no sessions are read'
    code, out, _ = dsh_cli("config")
    assert code == 0 and f"# note: sources.claude-code: {line}" in out.splitlines()
    assert "codex" not in "".join(row for row in out.splitlines() if row.startswith("# note"))
    code, out, _ = dsh_cli("sessions", "check")
    assert (code, out.splitlines()) == (0, [f"claude-code  {line}"])
    code, out, _ = dsh_cli("sessions", "check", "--source", "claude-code", "--json")
    assert json.loads(out) == {"source": "claude-code", "problem": line}
    missing.mkdir()
    code, out, _ = dsh_cli("sessions", "check")
    assert code == 0 and out.endswith(": no problems\n")
