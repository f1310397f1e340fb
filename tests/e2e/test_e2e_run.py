"""`dsh run` as a real process: streaming, persistence, `--json`, `--session`, scripts, mentions.

Each test runs the installed console script in a clean environment (data under the test's temp
dir, no user configuration, no API key) and reads what was stored back through `dsh sessions`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference import format_mention
from tests.e2e.e2e_support import PREFIX, clean_env, events_of, json_lines, ok, run_dsh, text_of

NOTICE = "the scripted model answers"
SESSION_LINE = re.compile(r"^session: (\S+)$", re.MULTILINE)


@dataclass
class Dsh:
    """`dsh` in one work dir on one data dir; `plugins` sets DSH_LOAD_PLUGINS when not None."""

    tmp: Path
    cwd: Path
    data: Path

    def env(self, plugins: str | None = None, **extra: str) -> dict[str, str]:
        env = clean_env(self.tmp, DSH_HOME=str(self.data), **extra)
        if plugins is not None:
            env["DSH_LOAD_PLUGINS"] = plugins
        return env

    def __call__(self, *args: str, plugins: str | None = None, **extra: str) -> Any:
        return run_dsh(args, env=self.env(plugins, **extra), cwd=self.cwd)

    def run(self, *args: str, plugins: str | None = None, **extra: str) -> tuple[str, Any]:
        """`dsh run ARGS`, which must succeed; returns (session id, the process)."""
        done = ok(self("run", *args, plugins=plugins, **extra))
        assert done.stderr.count(NOTICE) == 1, done.stderr
        ids = SESSION_LINE.findall(done.stderr)
        assert len(ids) == 1, done.stderr
        return ids[0], done

    def log(self, session_id: str) -> list[dict[str, Any]]:
        return json_lines(ok(self("sessions", "show", session_id, "--json", plugins="")).stdout)

    def ids(self) -> list[str]:
        return [r["id"] for r in json_lines(ok(self("sessions", "list", "--json", plugins="")).stdout)]


@pytest.fixture
def dsh(tmp_path: Path) -> Dsh:
    cwd = tmp_path / "work"
    cwd.mkdir()
    return Dsh(tmp_path, cwd, tmp_path / "data")


def _assert_turn(log: list[dict[str, Any]], turn: int) -> None:
    starts = [e["data"]["turn"] for e in events_of(log, "turn/start")]
    assert starts[-1] == turn
    end = events_of(log, "turn/end")[-1]
    assert end["data"] == {"turn": turn, "reason": {"kind": "completed"}}
    assert [e["seq"] for e in log] == list(range(len(log)))


def test_run_streams_the_reply_and_persists_the_session(dsh: Dsh) -> None:
    session_id, done = dsh.run("hello from e2e")
    assert done.stdout == "Scripted reply: hello from e2e\n"
    assert dsh.ids() == [session_id]
    log = dsh.log(session_id)
    _assert_turn(log, 1)
    (user,) = events_of(log, "user/message")
    assert user["data"] == {"content": [{"type": "text", "text": "hello from e2e"}], "source": {"kind": "user"}}
    (reply,) = events_of(log, "assistant/message")
    assert text_of(reply["data"]["content"]) == "Scripted reply: hello from e2e"
    # The streamed deltas are in the log too, and they spell the reply.
    chunks = [e["data"]["chunk"] for e in events_of(log, "assistant/chunk")]
    deltas = [c["text"] for c in chunks if c["type"] == "text-delta"]
    assert "".join(deltas) == "Scripted reply: hello from e2e"
    # Human-readable show works on the same data.
    shown = ok(dsh("sessions", "show", session_id, plugins="")).stdout
    assert f"session {session_id}" in shown and "hello from e2e" in shown


def test_run_json_prints_the_turn_and_session_continues(dsh: Dsh) -> None:
    session_id, done = dsh.run("--json", "first question")
    printed = json_lines(done.stdout)
    assert printed[0]["type"] == "turn/start"
    assert printed[-1]["type"] == "turn/end"
    assert {"user/message", "step/start", "request/header", "assistant/chunk", "assistant/message"} <= {
        e["type"] for e in printed
    }
    # What it printed is exactly what it stored.
    assert printed == dsh.log(session_id)

    # `--session` continues the same session: turn 2, the history in the request.
    again, done = dsh.run("--session", session_id, "--json", "second question")
    assert again == session_id
    printed = json_lines(done.stdout)
    assert printed[0]["type"] == "turn/start" and printed[0]["data"]["turn"] == 2
    assert printed[0]["seq"] > 0
    log = dsh.log(session_id)
    _assert_turn(log, 2)
    assert log[-len(printed) :] == printed
    assert [text_of(e["data"]["content"]) for e in events_of(log, "user/message")] == [
        "first question",
        "second question",
    ]
    assert dsh.ids() == [session_id]

    # Plain mode on the continued session streams only the new reply.
    _, done = dsh.run("--session", session_id, "third")
    assert done.stdout == "Scripted reply: third\n"
    _assert_turn(dsh.log(session_id), 3)


def test_run_with_a_script_calls_read_file(dsh: Dsh) -> None:
    (dsh.cwd / "notes.txt").write_text("the door is blue\nsecond line\n", encoding="utf-8")
    script = dsh.tmp / "script.json"
    script.write_text(
        json.dumps(
            [
                {"tool_call": {"id": "call-1", "name": "read_file", "arguments": {"path": "notes.txt"}}},
                {"text": "The file says the door is blue."},
            ]
        ),
        encoding="utf-8",
    )
    session_id, done = dsh.run("read notes.txt", plugins="fs-read", DSH_SCRIPT=str(script))
    assert done.stdout == "The file says the door is blue.\n"
    log = dsh.log(session_id)
    _assert_turn(log, 1)
    (call,) = events_of(log, "tool/call")
    assert call["data"]["name"] == "read_file"
    assert json.loads(call["data"]["arguments"]) == {"path": "notes.txt"}
    (result,) = events_of(log, "tool/result")
    assert result["data"]["callId"] == "call-1"
    assert result["data"]["isError"] is False
    assert "the door is blue\nsecond line" in text_of(result["data"]["content"])
    assert [e["data"]["step"] for e in events_of(log, "step/start")] == [1, 2]


def test_run_prepares_mentions_when_session_reference_is_mounted(dsh: Dsh) -> None:
    source_id, _ = dsh.run("remember: the door is blue", plugins="")
    mention = format_mention(source_id, "Door chat")
    typed = f"what colour is the door in {mention}?"

    # Mounted: the mention is prepared, the snapshot baked into the one user/message.
    target_id, done = dsh.run(typed, plugins="fs-read,session-reference")
    assert 'I read the referenced-session snapshot (1 session: "Door chat")' in done.stdout
    log = dsh.log(target_id)
    (user,) = events_of(log, "user/message")
    assert not events_of(log, "context/message")
    content = user["data"]["content"]
    assert content[0]["text"].startswith(PREFIX)
    assert "remember: the door is blue" in content[0]["text"]
    assert content[2] == {"type": "text", "text": "what colour is the door in @Door chat?"}
    envelope = user["data"]["envelope"]
    assert envelope["displayContent"] == [content[2]]
    assert envelope["prefixContexts"][0]["meta"]["references"][0]["sessionId"] == source_id

    # Not mounted: sent exactly as typed.
    plain_id, done = dsh.run(typed, plugins="fs-read")
    (user,) = events_of(dsh.log(plain_id), "user/message")
    assert user["data"] == {"content": [{"type": "text", "text": typed}], "source": {"kind": "user"}}
    assert done.stdout == f"Scripted reply: {typed}\n"
    before = dsh.ids()

    # A mention that cannot be prepared: one error line, exit 1, nothing sent or stored.
    for text, code, detail in (
        ("use dsh-session:IiJ", "SESSION_REFERENCE_INVALID_REFERENCE", '"dsh-session:IiJ"'),
        (f"use {format_mention('missing')}", "SESSION_REFERENCE_READ_FAILED", 'session "missing" not found'),
    ):
        failed = dsh("run", text, plugins="fs-read,session-reference")
        assert failed.returncode == 1, failed
        assert failed.stdout == ""
        errors = [line for line in failed.stderr.splitlines() if line.startswith("dsh: error:")]
        assert len(errors) == 1, failed.stderr
        assert errors[0].endswith(f"({code})")
        assert detail in errors[0]
        assert "Traceback" not in failed.stderr
        assert not SESSION_LINE.search(failed.stderr)
        assert dsh.ids() == before


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_failed_turn_exits_1_and_names_its_persisted_session(dsh: Dsh, as_json: bool) -> None:
    script = dsh.tmp / "fail.json"
    script.write_text(json.dumps([{"error": {"message": "model exploded", "code": "BOOM"}}]), encoding="utf-8")
    args = ["run", *(["--json"] if as_json else []), "try it"]
    failed = dsh(*args, plugins="", DSH_SCRIPT=str(script))
    assert failed.returncode == 1, failed
    assert failed.stderr.splitlines()[-1] == "dsh: error: turn failed: model exploded"
    assert "Traceback" not in failed.stderr
    (session_id,) = SESSION_LINE.findall(failed.stderr)
    log = dsh.log(session_id)
    end = events_of(log, "turn/end")[-1]
    assert end["data"]["reason"]["kind"] == "error"
    assert end["data"]["reason"]["failure"] == {"message": "model exploded", "code": "BOOM"}
    if as_json:
        assert json_lines(failed.stdout)[-1] == end


@pytest.mark.parametrize("as_json", [False, True])
def test_a_configured_model_without_its_key_fails_in_one_line_and_nothing_answers(dsh: Dsh, as_json: bool) -> None:
    config = dsh.tmp / "real.toml"
    config.write_text('[host]\nmodel = "openai:deepseek-chat"\n')
    done = dsh("--config", str(config), "run", *(["--json"] if as_json else []), "hello", plugins="")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == 'dsh: error: model "openai:deepseek-chat" needs an API key: set DEEPSEEK_API_KEY\n'
    assert dsh.ids() == []  # no session was made, and no scripted reply was taken for the model's
