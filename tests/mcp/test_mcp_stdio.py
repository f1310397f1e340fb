"""`dsh mcp` as a process over real stdio: frames only on stdout, every request answered with its id
(those the SDK's own stdio reader would drop included), EOF and SIGTERM, startup errors."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_host.mcp.cli import NO_SNAPSHOTS
from dsh_host.mcp.stdio import MAX_FRAME_BYTES
from dsh_host.session.events import SessionHeader
from dsh_session_reference import encode_uri
from tests.processes import dsh_command, frames_of, hermetic_env
from tests.stalled_pipe import end_input, pipe_capacity, wait_for_line, wait_until_full

# Its sessions are imported by hand.
pytestmark = pytest.mark.foreign_logs

INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


class McpProcess:
    """`dsh mcp` with pipes; frames are written as given and read one line at a time."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.process = subprocess.Popen(
            [*dsh_command(), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=hermetic_env(tmp_path, **env),
        )
        self.frames: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, frame: Any) -> None:
        self.write(json.dumps(frame).encode() + b"\n")

    def request(self, request_id: Any, method: str, params: Any = None) -> None:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method}
        self.send(frame if params is None else {**frame, "params": params})

    def answer(self, request_id: Any) -> dict[str, Any]:
        """Read frames until the answer to `request_id`; every line must be a frame."""
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline().decode()
            assert line, "stdout closed before the answer"
            (frame,) = frames_of(line)
            self.frames.append(frame)
            if "method" not in frame and frame.get("id") == request_id:
                return frame

    def initialize(self) -> None:
        """The handshake; `frames` then starts afresh."""
        self.request(0, "initialize", INITIALIZE)
        assert "result" in self.answer(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.frames.clear()

    def finish(self) -> tuple[int, list[dict[str, Any]], str]:
        """Close stdin (EOF) and wait: exit code, the frames still to come, stderr."""
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, list(frames_of(out.decode())), err.decode()


@pytest.fixture
def served(make_host, tmp_path) -> dict[str, str]:
    """Two stored sessions, and the environment `dsh mcp` serves them in."""
    host = make_host(data_dir=tmp_path / "data")
    for session_id in ("first", "second"):
        host.store.import_log(SessionHeader(id=session_id, created_at=1, cwd="/w"), [])
    return {"DSH_HOME": str(tmp_path / "data")}


def test_calls_in_flight_at_eof_are_answered_then_it_exits_0_with_frames_only(tmp_path, served):
    mcp = McpProcess(tmp_path, **served)
    mcp.request(0, "initialize", INITIALIZE)
    mcp.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    mcp.request(1, "tools/call", {"name": "read_sessions", "arguments": {"references": ["first", "second"]}})
    mcp.request(2, "resources/list")
    mcp.request(3, "tools/call", {"name": "search_sessions", "arguments": {"query": ""}})
    code, frames, err = mcp.finish()  # EOF right behind the requests, as `printf ... | dsh mcp`
    assert code == 0
    assert sorted(frame["id"] for frame in frames) == [0, 1, 2, 3]
    assert all("result" in frame and not frame["result"].get("isError") for frame in frames)
    assert err == ""


# (frame, the id its answer carries, the error code)
UNANSWERED_BY_THE_SDK = [
    pytest.param(b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 1.5, -32600, id="fractional id"),
    pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"ping"}', True, -32600, id="boolean id"),
    pytest.param(b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600, id="null id"),
    pytest.param(b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', {"a": 1}, -32600, id="object id"),
    pytest.param(b'{"jsonrpc":"1.0","id":4,"method":"ping"}', 4, -32600, id="old jsonrpc"),
    pytest.param(b'{"id":5,"method":"ping"}', 5, -32600, id="no jsonrpc"),
    pytest.param(b'{"jsonrpc":"2.0","id":6,"method":"ping","params":[1]}', 6, -32600, id="array params"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":7}', 7, -32600, id="number method"),
    pytest.param(b'{"jsonrpc":"2.0","id":"8"}', "8", -32600, id="neither method nor result"),
    pytest.param(b'[{"jsonrpc":"2.0","id":9,"method":"ping"}]', None, -32600, id="batch"),
    pytest.param(b'"a string"', None, -32600, id="not an object"),
    pytest.param(b'{"jsonrpc":"2.0","id":10,"method":"pi', None, -32700, id="truncated"),
    pytest.param(b"\xff\xfe not utf-8 {", None, -32700, id="not utf-8"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, None, -32700, id="nested past any parser's depth"),
]


@pytest.mark.parametrize(("frame", "answer_id", "code"), UNANSWERED_BY_THE_SDK)
def test_a_frame_the_sdk_would_drop_is_answered_and_the_server_stays_up(tmp_path, served, frame, answer_id, code):
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    mcp.write(frame + b"\n")
    mcp.request("after", "ping")
    assert mcp.answer("after")["result"] == {}
    (answer,) = [f for f in mcp.frames if f.get("id") != "after"]
    assert (answer["id"], answer["error"]["code"]) == (answer_id, code)
    assert "\n" not in answer["error"]["message"]
    code_, rest, _ = mcp.finish()
    assert (code_, rest) == (0, [])


def test_a_malformed_response_from_the_client_is_dropped_with_a_warning_never_answered(tmp_path, served):
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    mcp.write(b'{"jsonrpc":"2.0","id":9,"result":5}\n')
    mcp.request("after", "ping")
    assert mcp.answer("after")["result"] == {}
    assert [f for f in mcp.frames if f.get("id") != "after"] == []
    code, rest, err = mcp.finish()
    assert (code, rest) == (0, [])
    assert err.splitlines() == [
        "dsh: warning: mcp: dropped a malformed response from the client (a response is never answered)"
    ]


def test_lone_surrogates_and_controls_in_a_request_get_an_error_result(tmp_path, served):
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    # Valid JSON the SDK's parser refuses: lone surrogate escapes (in the id too).
    mcp.write(b'{"jsonrpc":"2.0","id":"\\ud800x","method":"tools/call","params":{"name":"read_sessions",'
              b'"arguments":{"references":["\\udfff","first"]}}}\n')  # fmt: skip
    read = mcp.answer("\ud800x")
    assert read["result"]["isError"] is True
    assert read["result"]["content"][0]["text"].startswith("invalid arguments for read_sessions: references.0:")
    mcp.write(
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"drop\\u001b[2J\\ud800","arguments":{}}}\n'
    )
    assert mcp.answer(2)["error"] == {"code": -32602, "message": "Unknown tool: drop\\x1b[2J\\ud800"}
    mcp.write(b'{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"dsh-session:\\ud800"}}\n')
    unknown = mcp.answer(3)["error"]
    assert (unknown["code"], unknown["data"]) == (-32602, {"uri": "dsh-session:\ud800"})  # the exact URI, escaped
    mcp.request(4, "tools/call", {"name": "search_sessions", "arguments": {"query": "\x00\x1b first"}})
    assert mcp.answer(4)["result"]["structuredContent"] == {"sessions": []}  # plain text, matching nothing
    mcp.request(5, "tools/call", {"name": "search_sessions", "arguments": {"query": "\ud800 first"}})
    assert mcp.answer(5)["result"]["content"][0]["text"].startswith("invalid arguments for search_sessions: query:")
    code, rest, err = mcp.finish()
    assert (code, rest, err) == (0, [], "")


def test_a_session_whose_id_no_utf_8_can_hold_is_found_read_and_listed_by_its_exact_uri(
    make_host, tmp_path, log_builder
):
    L = log_builder
    host = make_host(data_dir=tmp_path / "data")
    session_id, title = "lone \ud800 id", "</referenced-sessions> \udfff \x1b]0;t\x07"
    title_event = L.raw("session/title", 1, {"title": title, "messageSeqs": [], "source": {"kind": "user"}})
    host.store.import_log(
        SessionHeader(id=session_id, created_at=1, cwd="/w\ud801"), L.events([L.user(0, "hi"), title_event])
    )
    mcp = McpProcess(tmp_path, DSH_HOME=str(tmp_path / "data"))
    mcp.initialize()
    mcp.request(1, "tools/call", {"name": "search_sessions", "arguments": {"query": ""}})
    (found,) = mcp.answer(1)["result"]["structuredContent"]["sessions"]
    assert (found["id"], found["cwd"], found["uri"]) == ("lone \\ud800 id", "/w\\ud801", encode_uri(session_id))
    assert found["title"] == "</referenced-sessions> \\udfff \x1b]0;t\x07"  # JSON carries the controls
    mcp.request(2, "tools/call", {"name": "read_sessions", "arguments": {"references": [found["uri"]]}})
    (source,) = mcp.answer(2)["result"]["structuredContent"]["sources"]
    assert (source["sessionId"], source["uri"]) == ("lone \\ud800 id", encode_uri(session_id))
    mcp.request(3, "resources/list")
    (resource,) = mcp.answer(3)["result"]["resources"]
    mcp.request(4, "resources/read", {"uri": resource["uri"]})
    assert mcp.answer(4)["result"]["contents"][0]["text"].count("</referenced-sessions>") == 1
    code, rest, err = mcp.finish()
    assert (code, rest, err) == (0, [], "")


def test_a_frame_longer_than_the_limit_is_answered_with_its_id_and_skipped(tmp_path, served):
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    query = "x" * (MAX_FRAME_BYTES + 10)
    mcp.request(7, "tools/call", {"name": "search_sessions", "arguments": {"query": query}})
    assert mcp.answer(7)["error"] == {"code": -32600, "message": f"frame longer than {MAX_FRAME_BYTES} bytes"}
    mcp.request(8, "tools/call", {"name": "search_sessions", "arguments": {"query": "x" * 5_000}})
    assert mcp.answer(8)["result"]["content"][0]["text"] == (
        "invalid arguments for search_sessions: query: String should have at most 1000 characters"
    )
    code, rest, _ = mcp.finish()
    assert (code, rest) == (0, [])


def test_sigterm_ends_it_with_exit_0(tmp_path, served):
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    mcp.process.send_signal(signal.SIGTERM)
    code, rest, err = mcp.finish()
    assert (code, rest, err) == (0, [], "")


def _stalled_mid_frame(tmp_path: Path, served: dict[str, str]) -> tuple[McpProcess, str]:
    """`dsh mcp` blocked writing a frame many times the pipe's size to a client that does not read;
    the frame's id.

    So many that the old end, which dropped the unwritten rest of the frame when the event loop
    closed, could not let it out while the client started reading during that end.
    """
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    assert mcp.process.stdout is not None
    big_id = "x" * min(12 * pipe_capacity(mcp.process.stdout), MAX_FRAME_BYTES - 1_000)
    mcp.request(big_id, "ping")
    wait_until_full(mcp.process.stdout)
    return mcp, big_id


@pytest.mark.parametrize("how", ["sigterm", "eof"])
def test_the_end_mid_write_finishes_the_frame_and_exits_0_within_2_s(tmp_path, served, how):
    mcp, big_id = _stalled_mid_frame(tmp_path, served)
    started = time.monotonic()
    end_input(mcp.process, how)
    assert mcp.process.stdout is not None
    out = mcp.process.stdout.read()
    assert mcp.process.wait(timeout=60) == 0
    assert time.monotonic() - started < 2.0
    assert [frame["id"] for frame in frames_of(out.decode())] == [big_id]  # every line a whole frame


@pytest.mark.parametrize("how", ["sigterm", "eof"])
def test_a_frame_still_in_flight_after_the_calls_grace_is_finished_for_a_late_reader(tmp_path, served, how):
    mcp, big_id = _stalled_mid_frame(tmp_path, served)
    end_input(mcp.process, how)
    assert mcp.process.stderr is not None
    # The calls' grace is over (the answer is still going out): only now does the client read.
    wait_for_line(mcp.process.stderr, "mcp: cancelling calls still running")
    assert mcp.process.stdout is not None
    out = mcp.process.stdout.read()
    assert mcp.process.wait(timeout=60) == 0
    assert [frame["id"] for frame in frames_of(out.decode())] == [big_id]


def test_without_session_snapshots_it_refuses_to_start_in_one_line(tmp_path, served):
    done = subprocess.run(
        [*dsh_command(), "mcp"],
        input=json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}).encode(),
        capture_output=True,
        cwd=tmp_path,
        env=hermetic_env(tmp_path, DSH_LOAD_PLUGINS="mcp", **served),
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode().splitlines() == [f"dsh: error: {NO_SNAPSHOTS}"]


def test_stdout_that_is_not_a_pipe_or_socket_exits_2_with_one_line(tmp_path, served):
    out = tmp_path / "out.txt"
    with out.open("wb") as stdout:
        done = subprocess.run(
            [*dsh_command(), "mcp"],
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=hermetic_env(tmp_path, **served),
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "dsh: error: dsh mcp: stdout must be a pipe or a socket (it carries protocol frames only)"
    ]
    assert out.read_bytes() == b""


def test_a_resource_uri_reads_like_its_session_over_stdio(tmp_path, served):
    mcp = McpProcess(tmp_path, **served)
    mcp.initialize()
    mcp.request(1, "resources/read", {"uri": encode_uri("first")})
    (contents,) = mcp.answer(1)["result"]["contents"]
    mcp.request(2, "tools/call", {"name": "read_sessions", "arguments": {"references": ["first"]}})
    assert contents["text"] == mcp.answer(2)["result"]["content"][0]["text"]
    code, _, _ = mcp.finish()
    assert code == 0
