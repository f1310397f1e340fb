"""`dsh acp` as a process over real stdio: frames only on stdout, EOF, SIGTERM, startup errors."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.acp.harness import store_events, turn_ends, wait_for_logged
from tests.processes import dsh_command, frames_of, hermetic_env
from tests.stalled_pipe import end_input, pipe_capacity, wait_until_full

ANSWER = [{"text": "Hello from dsh"}]


class AcpProcess:
    """`dsh acp` with pipes; frames are written and read one line at a time."""

    def __init__(self, tmp_path: Path, entries: Any, **env: str) -> None:
        self.process = subprocess.Popen(
            [*dsh_command(), "acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=hermetic_env(tmp_path, entries, **env),
        )
        self.lines: list[str] = []
        self._next_id = 0

    def send(self, method: str, params: Any) -> int:
        request_id = self._next_id
        self._next_id += 1
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(frame) + "\n").encode())
        self.process.stdin.flush()
        return request_id

    def response(self, request_id: int) -> dict[str, Any]:
        """Read frames until the response to `request_id`; every line must be a frame."""
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline().decode()
            assert line, "stdout closed before the response"
            self.lines.append(line)
            (frame,) = frames_of(line)
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    def call(self, method: str, params: Any) -> dict[str, Any]:
        return self.response(self.send(method, params))

    def open_session(self, cwd: Path) -> str:
        self.call("initialize", {"protocolVersion": 1})
        return self.call("session/new", {"cwd": str(cwd), "mcpServers": []})["result"]["sessionId"]

    def finish(self) -> tuple[int, str, str]:
        """Close stdin (EOF) and wait: exit code, the rest of stdout, stderr."""
        out, err = self.process.communicate(timeout=30)
        self.lines.extend(out.decode().splitlines(keepends=True))
        list(frames_of("".join(self.lines)))
        return self.process.returncode, out.decode(), err.decode()


def test_a_prompt_round_trip_over_stdio_prints_frames_only_and_exits_0_at_eof(tmp_path):
    acp = AcpProcess(tmp_path, ANSWER)
    session_id = acp.open_session(tmp_path)
    mention = "compare with dsh-session:eyJpZCI6ImFiYyJ9 please"
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": mention}]}
    assert acp.call("session/prompt", prompt)["result"] == {"stopReason": "end_turn"}
    update = json.loads(acp.lines[-2])
    assert update["method"] == "session/update"
    assert update["params"]["update"] == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Hello from dsh"},
    }
    assert acp.call("session/load", {"sessionId": session_id})["error"]["code"] == -32601
    code, rest, err = acp.finish()
    assert (code, rest) == (0, "")
    # Every installed plugin is mounted by default, session-reference and the sources among them;
    # the transport leaves them out without a word, since no list asked for them.
    assert "ignoring" not in err
    events = store_events(tmp_path)[session_id]
    assert events[-1].type == "turn/end"
    # session-reference is configured (by default) but absent: the mention stayed plain text.
    (message,) = [e.data for e in events if e.type == "user/message"]
    assert message == {"content": [{"type": "text", "text": mention}], "source": {"kind": "user"}}


def test_one_line_about_ignored_features_an_explicit_list_names(tmp_path):
    acp = AcpProcess(tmp_path, ANSWER, DSH_LOAD_PLUGINS="fs-read,session-reference,claude-code,acp")
    acp.open_session(tmp_path)
    code, rest, err = acp.finish()
    assert (code, rest) == (0, "")
    assert [line for line in err.splitlines() if "ignoring" in line] == [
        "dsh: warning: acp: ignoring session-reference, claude-code and session query: "
        "the ACP transport mounts none of them"
    ]


def test_no_line_about_ignored_features_when_none_is_configured(tmp_path):
    acp = AcpProcess(tmp_path, ANSWER, DSH_LOAD_PLUGINS="fs-read,acp")
    acp.open_session(tmp_path)
    code, rest, err = acp.finish()
    assert (code, rest) == (0, "")
    assert "ignoring" not in err


def test_stdout_that_is_not_a_pipe_or_socket_exits_2_with_one_line(tmp_path):
    out = tmp_path / "out.txt"
    with out.open("wb") as stdout:
        done = subprocess.run(
            [*dsh_command(), "acp"],
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=hermetic_env(tmp_path, ANSWER),
            timeout=30,
        )
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "dsh: error: dsh acp: stdout must be a pipe or a socket (it carries protocol frames only)"
    ]
    assert out.read_bytes() == b""


def test_startup_errors_leave_stdout_empty(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[host\n")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[host]\nplugins = ["no-such-plugin"]\n')
    for config in (bad, unknown):
        done = subprocess.run(
            [*dsh_command(), "acp"],
            input=b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n',
            capture_output=True,
            cwd=tmp_path,
            env=hermetic_env(tmp_path, ANSWER, DSH_CONFIG=str(config)),
            timeout=30,
        )
        assert done.returncode == 2
        assert done.stdout == b""
        (line,) = done.stderr.decode().splitlines()
        assert line.startswith("dsh: error: ")


def _mid_turn(tmp_path: Path) -> tuple[AcpProcess, int, str]:
    acp = AcpProcess(tmp_path, [{"hang": True}])
    session_id = acp.open_session(tmp_path)
    prompt_id = acp.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "wait"}]})
    assert wait_for_logged(tmp_path, "request/header") == session_id
    return acp, prompt_id, session_id


def test_eof_mid_turn_settles_cancelled_disposes_and_exits_0(tmp_path):
    acp, prompt_id, session_id = _mid_turn(tmp_path)
    code, rest, _ = acp.finish()
    assert code == 0
    (response,) = frames_of(rest)
    assert response == {"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "cancelled"}}
    events = store_events(tmp_path)[session_id]
    assert turn_ends(events) == ["disposed"]


def test_sigterm_mid_turn_settles_cancelled_disposes_and_exits_0(tmp_path):
    acp, prompt_id, session_id = _mid_turn(tmp_path)
    acp.process.send_signal(signal.SIGTERM)
    assert acp.response(prompt_id)["result"] == {"stopReason": "cancelled"}
    code, rest, _ = acp.finish()
    assert (code, rest) == (0, "")
    events = store_events(tmp_path)[session_id]
    assert turn_ends(events) == ["disposed"]


def _stalled_mid_frame(tmp_path: Path) -> tuple[AcpProcess, str]:
    """`dsh acp` blocked writing a frame many times the pipe's size (the answer to an `initialize`
    with a huge id) to a client that does not read; the frame's id."""
    acp = AcpProcess(tmp_path, ANSWER)
    acp.call("initialize", {"protocolVersion": 1})
    assert acp.process.stdout is not None and acp.process.stdin is not None
    big_id = "x" * (12 * pipe_capacity(acp.process.stdout))
    frame = {"jsonrpc": "2.0", "id": big_id, "method": "initialize", "params": {"protocolVersion": 1}}
    acp.process.stdin.write((json.dumps(frame) + "\n").encode())
    acp.process.stdin.flush()
    wait_until_full(acp.process.stdout)
    return acp, big_id


@pytest.mark.parametrize("how", ["sigterm", "eof"])
def test_the_end_mid_write_finishes_the_frame_and_exits_0_within_2_s(tmp_path, how):
    acp, big_id = _stalled_mid_frame(tmp_path)
    started = time.monotonic()
    end_input(acp.process, how)
    assert acp.process.stdout is not None
    out = acp.process.stdout.read()
    assert acp.process.wait(timeout=60) == 0
    assert time.monotonic() - started < 2.0
    assert [frame["id"] for frame in frames_of(out.decode())] == [big_id]  # every line a whole frame
