"""A host killed with SIGKILL mid-turn loses nothing it flushed; resume closes the turn."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_host.session.repair import OUTCOME_UNKNOWN_TEXT
from dsh_host.testing import HostFactory

RUNNER = Path(__file__).with_name("agent_crash_runner.py")


def kill_at(data_dir: Path, mode: str) -> None:
    """Run the runner until it reports reaching its blocking point, then SIGKILL it."""
    process = subprocess.Popen([sys.executable, str(RUNNER), str(data_dir), mode], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.strip() == f"in {mode}", f"runner exited early with {process.poll()}"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


async def resumed_types(make_host: HostFactory, data_dir: Path) -> list:
    host = make_host(data_dir=data_dir)
    try:
        session = await host.sessions.resume("crash")
        return list(session.events)
    finally:
        host.close()


@pytest.mark.parametrize("mode", ["request", "tool"])
async def test_sigkill_mid_turn_then_resume(make_host, tmp_path, mode):
    kill_at(tmp_path, mode)
    events = await resumed_types(make_host, tmp_path)
    types = [e.type for e in events if e.type != "session/title"]
    if mode == "request":
        # The checkpoint before the model call made the prompt and the request header durable.
        assert types == ["turn/start", "user/message", "step/start", "request/header", "step/end", "turn/end"]
    else:
        # The checkpoint before the tool body made the call durable; its outcome is unknown.
        assert types[:4] == ["turn/start", "user/message", "step/start", "request/header"]
        assert types[-5:] == ["assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
        result = next(e for e in events if e.type == "tool/result")
        call = next(e for e in events if e.type == "tool/call")
        assert result.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        assert result.data["content"][0]["text"] == OUTCOME_UNKNOWN_TEXT
        assert "Do not retry blindly." in OUTCOME_UNKNOWN_TEXT
        assert list(result.source_event_seqs) == [call.seq]
    assert events[-1].data == {"turn": 1, "reason": {"kind": "interrupted"}}
    # Resuming again changes nothing: the repair was committed once.
    assert [e.type for e in await resumed_types(make_host, tmp_path)] == [e.type for e in events]
