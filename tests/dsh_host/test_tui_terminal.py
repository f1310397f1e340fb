"""`dsh chat` in a real terminal: tmux runs it on a pseudo-terminal and the test reads the screen.

This is the whole path the unit tests stub out: the CLI, a PTY, prompt_toolkit's VT100 input
and output, rich writing into the scrollback, the real agent on the keyless model, and the
session-reference plugin. Waits poll the screen under a deadline.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_host.testing import HostFactory
from tests.terminal import Terminal

DSH = Path(sys.executable).with_name("dsh")
PROBE_TITLE = "evil\x1b]2;pwned\x07title"
PROBE_CWD = "/x/\x1b[31mred\x9b"


@pytest.fixture
def home(make_host: HostFactory, tmp_path: Path) -> Path:
    """A data dir holding one stored session whose title, cwd and text carry terminal controls."""
    data = tmp_path / "home"
    host = make_host(data_dir=data)
    try:
        session = host.sessions.create(PROBE_CWD, "evil-session", created_at=1)
        content = [{"type": "text", "text": f"stored {PROBE_TITLE}"}]
        session.append("user/message", {"content": content, "source": {"kind": "user"}}, surface_op="append")
        session.append("session/title", {"title": PROBE_TITLE, "messageSeqs": [0], "source": "test"})
        host.store.append(session.header, session.pending)
    finally:
        host.close()
    return data


@pytest.fixture
def terminal(home: Path, tmp_path: Path) -> Iterator[Terminal]:
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "source-file.ts").write_text("x")
    env = {
        "DSH_HOME": str(home),
        "DSH_LOAD_PLUGINS": "fs-read,session-reference",
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
    }
    term = Terminal([str(DSH), "chat", "--session", "evil-session"], cwd=workspace, env=env, width=110, height=45)
    try:
        yield term
    finally:
        term.close()


@pytest.mark.foreign_logs  # a hand-built log (no turns), not one dsh wrote
def test_chat_in_a_real_terminal(terminal: Terminal) -> None:
    # Resuming prints the stored conversation, controls as inert text.
    screen = terminal.wait_for("features: fs-read, session-reference")
    assert "scripted model (keyless)" in screen
    screen = terminal.wait_for(r"stored evil\x1b]2;pwned\x07title")
    # The window title names the session by its title, as inert text: the OSC inside never acted.
    assert terminal.title() == r"dsh · evil\x1b]2;pwned\x07title"

    # A turn on the keyless model.
    terminal.type("hello there")
    terminal.press("Enter")
    terminal.wait_for("Scripted reply: hello there")

    # A new session mentions the stored one through the completion menu.
    terminal.type("/new")
    terminal.press("Enter")
    terminal.wait_for("DSH chat", count=2)
    terminal.type("compare @evil")
    screen = terminal.wait_for(r"Session · evil\x1b]2;pwned\x07title")
    assert r"evil-session · /x/\x1b[31mred\x9b" in screen
    terminal.press("Tab")
    terminal.type("and @sfts")
    terminal.wait_for("File · source-file.ts")
    terminal.press("Tab")
    terminal.press("Enter")
    screen = terminal.wait_for("I read the referenced-session snapshot")
    assert r"compare @evil\x1b]2;pwned\x07title and @src/source-file.ts" in screen
    assert r"Referenced sessions · evil\x1b]2;pwned\x07title (evil-session)" in screen
    title = terminal.title()
    assert title.startswith("dsh · ") and title != "pwned" and not any(ord(c) < 0x20 for c in title)

    # Ctrl+C twice leaves, with a clean exit status: once the turn has ended (a Ctrl+C while it
    # still runs, writing its end, would cancel it instead).
    terminal.wait_until(lambda: "running · Esc to cancel" not in terminal.screen(), "the turn to end")
    terminal.press("C-c")
    terminal.wait_for("Press Ctrl+C again to exit.")
    terminal.press("C-c")
    terminal.wait_for("[dsh exited 0]")
