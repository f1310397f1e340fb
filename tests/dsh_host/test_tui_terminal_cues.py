"""The chat's cues in a real terminal (tmux): the window title, the steering badge, its drop.

The keyless model's script makes the first turn hang until it is cancelled, so a message typed
meanwhile goes in as steering; cancelling the turn drops it, and the chat says so.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.terminal import Terminal

DSH = Path(sys.executable).with_name("dsh")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"hang": True}]), encoding="utf-8")
    env = {
        "DSH_HOME": str(tmp_path / "home"),
        "DSH_LOAD_PLUGINS": "",
        "DSH_SCRIPT": str(script),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
    }
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    term = Terminal([str(DSH), "chat"], cwd=workspace, env=env, width=110, height=30)
    try:
        yield term
    finally:
        term.close()


def test_title_steering_badge_and_a_dropped_steer(terminal: Terminal) -> None:
    screen = terminal.wait_for("features: none")
    session_id = screen.split("session ", 1)[1].split()[0]
    terminal.wait_until(lambda: terminal.title() == f"dsh · {session_id}", "the window title")

    terminal.type("first request")
    terminal.press("Enter")
    terminal.wait_for("running · Esc to cancel")
    terminal.type("also mind the tests")
    terminal.press("Enter")
    # The steered message waits for the next step, badged, in the live area.
    terminal.wait_for("Steering  also mind the tests")

    terminal.press("Escape")
    screen = terminal.wait_for("Steering dropped: also mind the tests")
    assert "Turn cancelled." in screen
    terminal.wait_until(lambda: "Steering  also mind" not in terminal.screen(), "the badge to go")

    terminal.press("C-c")
    terminal.wait_for("Press Ctrl+C again to exit.")
    terminal.press("C-c")
    screen = terminal.wait_for("[dsh exited 0]")
    assert "Traceback" not in screen
