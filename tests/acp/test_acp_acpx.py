"""`dsh acp` driven by acpx, an independent headless ACP client (npm, run on the Node 22 it pins).

`.ci/run` installs both from `tests/acp/node/package-lock.json` (`npm install --no-save`) and names their bin
folder in `$DSH_ACP_NODE_BIN` (so a clone without node_modules finds them too). Without them
these tests skip locally, naming the command that installs them; in CI (`CI` set) they fail.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.acp.harness import store_events, turn_ends, wait_for_logged
from tests.processes import dsh_command, hermetic_env

NODE_DIR = Path(__file__).resolve().parent / "node"
BIN = Path(os.environ.get("DSH_ACP_NODE_BIN") or NODE_DIR / "node_modules" / ".bin")
ANSWER = [{"text": "Hello from dsh"}]


@pytest.fixture
def acpx(tmp_path: Path) -> Any:
    """Run acpx against `dsh acp` in `tmp_path`; returns run(args, entries, ...) -> CompletedProcess."""
    if not (BIN / "acpx").exists() or not (BIN / "node").exists():
        missing = f"acpx or node missing under {BIN} (run: npm install --prefix {NODE_DIR} --no-save)"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    agent = shlex.join([*dsh_command(), "acp"])

    def command(args: tuple[str, ...], ttl: int) -> list[str]:
        # acpx's own flags first, then its subcommand. The TTL is how long a session's queue owner
        # waits idle for the next prompt before it retires: short, so no owner outlives its test.
        return [str(BIN / "acpx"), "--agent", agent, "--cwd", str(tmp_path), "--ttl", str(ttl), *args]

    def environment(entries: Any) -> dict[str, str]:
        env = hermetic_env(tmp_path, entries)
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(*args: str, entries: Any = ANSWER, ttl: int = 2) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command(args, ttl), capture_output=True, text=True, cwd=tmp_path, env=environment(entries), timeout=120
        )

    def start(*args: str, entries: Any = ANSWER, ttl: int = 2) -> subprocess.Popen[str]:
        return subprocess.Popen(
            command(args, ttl),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=environment(entries),
        )

    run.start = start
    return run


def _frames(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_exec_answers_in_transcript_order_with_no_agent_to_client_request(acpx):
    done = acpx("--format", "json", "exec", "hi there")
    assert done.returncode == 0, done.stderr
    frames = _frames(done.stdout)
    steps = [(f.get("method"), "id" in f) for f in frames]
    assert steps == [
        ("initialize", True),
        (None, True),
        ("session/new", True),
        (None, True),
        ("session/prompt", True),
        ("session/update", False),
        (None, True),
    ]
    assert frames[5]["params"]["update"]["content"] == {"type": "text", "text": "Hello from dsh"}
    assert frames[-1]["result"] == {"stopReason": "end_turn"}
    # The only frames with a method the agent sent are session/update notifications.
    agent_methods = {f["method"] for f in frames if "method" in f} - {"initialize", "session/new", "session/prompt"}
    assert agent_methods == {"session/update"}
    text = acpx("exec", "hi there")
    assert text.returncode == 0, text.stderr
    assert "Hello from dsh" in text.stdout


def test_format_quiet_prints_only_the_answer(acpx):
    done = acpx("--format", "quiet", "exec", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from dsh\n"


def test_an_mcp_server_config_is_rejected(acpx, tmp_path):
    servers = {"mcpServers": [{"name": "tools", "command": "/bin/true", "args": [], "env": []}]}
    (tmp_path / "mcp.json").write_text(json.dumps(servers))
    done = acpx("--mcp-config", str(tmp_path / "mcp.json"), "exec", "hi")
    assert done.returncode != 0
    assert "Invalid params: mcpServers are not supported" in done.stdout + done.stderr
    assert all(not any(e.type == "turn/start" for e in events) for events in store_events(tmp_path).values())


def test_sigint_during_a_waiting_turn_cancels_it(acpx, tmp_path):
    running = acpx.start("--format", "json", "exec", "wait", entries=[{"hang": True}])
    session_id = wait_for_logged(tmp_path, "request/header")
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=60)
    frames = _frames(out)
    assert {"stopReason": "cancelled"} in [f.get("result") for f in frames], (out, err)
    assert not [f for f in frames if f.get("method") == "session/update"]
    wait_for_logged(tmp_path, "turn/end")  # the agent's process may outlive acpx by a moment
    assert turn_ends(store_events(tmp_path)[session_id]) in (["aborted"], ["disposed"])


def test_a_persistent_session_takes_two_prompts_and_a_cancel(acpx, tmp_path):
    entries = [{"text": "first answer"}, {"text": "second answer"}, {"hang": True}]
    # The session's owner must outlive the gap between two acpx processes, which on a loaded
    # machine is longer than the default 2 s; `sessions close` retires it at the end.
    ttl = 60
    created = acpx("sessions", "new", entries=entries, ttl=ttl)
    assert created.returncode == 0, created.stderr
    try:
        for prompt, answer in (("one", "first answer"), ("two", "second answer")):
            done = acpx("--format", "quiet", "prompt", prompt, entries=entries, ttl=ttl)
            assert (done.returncode, done.stdout) == (0, f"{answer}\n"), done.stderr
        waiting = acpx.start("--format", "json", "prompt", "three", entries=entries, ttl=ttl)
        session_id = wait_for_logged(tmp_path, "turn/start", count=3)
        cancelled = acpx("cancel", entries=entries, ttl=ttl)
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, err
        assert {"stopReason": "cancelled"} in [f.get("result") for f in _frames(out)]
    finally:
        acpx("sessions", "close", entries=entries, ttl=ttl)
    wait_for_logged(tmp_path, "turn/end", count=3)
    sessions = store_events(tmp_path)
    assert list(sessions) == [session_id]
    events = sessions[session_id]
    assert turn_ends(events) == ["completed", "completed", "aborted"]
    assert [e.data["content"][0]["text"] for e in events if e.type == "user/message"] == ["one", "two", "three"]
