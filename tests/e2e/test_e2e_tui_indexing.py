"""The `@` menu while another agent's sessions are indexed, in a real terminal (tmux).

A home of 400 small Claude Code transcripts, mounted through `gated_claude_code` (the real
source, its first build held at a gate after 100 files). Cold: typing `@topic` opens a menu
that says `Claude Code · indexing sessions, 100 of 400 files` and lists the sessions indexed so
far; once the test opens the gate, and without another keystroke, the sessions read after it
appear and the indexing line goes. Warm (a second chat on the same data dir): the sessions are
there at once and no indexing line shows. Every wait polls the screen under a deadline.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from tests.dsh_sources.builders import BASE_MS, ClaudeTranscript
from tests.e2e.e2e_support import clean_env, dsh_command
from tests.terminal import DEADLINE, Terminal

EARLY, LATE, GATE_AFTER = 390, 10, 100
TOTAL = EARLY + LATE
LINE = "Claude Code · indexing sessions"


def write_home(claude: Path) -> None:
    """`EARLY` sessions, then `LATE` newer and smaller ones (the build reads the largest first)."""
    for n in range(EARLY):
        t = ClaudeTranscript(cwd="/work/early", clock=BASE_MS + n * 60_000)
        t.user(f"early topic {n}")
        t.reply(("text", "an answer long enough to make this file larger than the late ones " * 4))
        t.write(claude)
    for n in range(LATE):
        t = ClaudeTranscript(cwd="/work/late", clock=BASE_MS + 10**9 + n * 60_000)
        t.user(f"late topic {n}")
        t.reply(("text", "ok"))
        t.write(claude)


def install_plugin(folder: Path) -> None:
    """`gated_claude_code` and a dist-info making it the installed `dsh` plugin `gated-claude-code`.

    A module of its own name in a folder of its own: the child imports it whatever `tests` is.
    """
    info = folder / "dsh_gated_test-0.dist-info"
    info.mkdir(parents=True)
    shutil.copyfile(Path(__file__).with_name("gated_claude_code.py"), folder / "dsh_gated_claude_code.py")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-gated-test\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[dsh]\ngated-claude-code = dsh_gated_claude_code\n")


def open_gate(gate: Path) -> None:
    """Let the build go on: open the fifo's write end (waiting for the build to reach it), close it."""
    opener = threading.Thread(target=lambda: gate.open("wb").close(), daemon=True)
    opener.start()
    opener.join(DEADLINE)
    assert not opener.is_alive(), "the build never reached the gate"


def chat(tmp_path: Path, gate: Path, workspace: Path) -> Terminal:
    path = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    env = clean_env(
        tmp_path,
        DSH_HOME=str(tmp_path / "data"),
        DSH_LOAD_PLUGINS="gated-claude-code,session-reference",
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        CODEX_HOME=str(tmp_path / "codex"),
        DSH_TEST_GATE=str(gate),
        DSH_TEST_GATE_AFTER=str(GATE_AFTER),
        PYTHONPATH=path,
        TERM="xterm-256color",
    )
    return Terminal(dsh_command(), cwd=workspace, env=env, height=40)


def quit_chat(term: Terminal) -> str:
    term.press("C-u")
    term.type("/quit")
    term.press("Enter")
    return term.wait_for("[dsh exited 0]")


def menu_lines(screen: str) -> str:
    """The screen below the editor's prompt (where the menu is drawn)."""
    return screen.rsplit("› @topic", 1)[-1]


def test_the_menu_fills_itself_while_sessions_are_indexed_and_is_whole_at_once_when_warm(tmp_path: Path) -> None:
    write_home(tmp_path / "claude")
    install_plugin(tmp_path / "site")
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    term = chat(tmp_path, gate, workspace)
    try:
        term.wait_for("features: gated-claude-code, session-reference")
        term.type("@topic")
        term.wait_for(f"{LINE}, {GATE_AFTER} of {TOTAL} files")
        term.wait_for("Claude Code · early topic")
        screen = term.screen()
        assert "late topic" not in screen  # read after the gate
        open_gate(gate)
        term.wait_for("Claude Code · late topic")
        term.wait_until(lambda: LINE not in term.screen(), "the indexing line's end")
        screen = term.screen()
        assert "Claude Code · late topic 9" in menu_lines(screen)  # the newest first
        assert "Traceback" not in quit_chat(term)
    finally:
        term.close()

    term = chat(tmp_path, gate, workspace)
    try:
        term.wait_for("features: gated-claude-code, session-reference")
        term.type("@topic")
        screen = term.wait_for("Claude Code · late topic 9")
        assert LINE not in screen
        assert "Traceback" not in quit_chat(term)
    finally:
        term.close()
