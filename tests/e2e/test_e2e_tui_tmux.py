"""`dsh` (the chat UI) in a real terminal: tmux runs it, the test types and reads the screen.

The data dir holds a compacted source session (its old user and assistant messages replaced by
a checkpoint) and a session whose title carries terminal control sequences. The test mentions
the compacted source through the `@` completion menu, submits, waits for the scripted reply and
the card line, quits with `/quit`, and then reads the stored log of the new session: one
`user/message` holding snapshot, delimiter and prompt, nothing that compaction shadowed.
Along the way the hostile title must show up as inert `\\x1b...` text and must not retitle the
terminal: the window title names the chat's session, and nothing else. Typed key by key, a Tab
pressed at once after the text, or as soon as a row shows (perhaps from an earlier key's answer
while a later key's is fetched), chooses the session. Every wait polls the screen under a
deadline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_host.session.session import Session
from dsh_host.testing import HostFactory
from tests.e2e.e2e_support import COMPACT_SOURCE, REFERENCE_SOURCE, clean_env, dsh_command, run_dsh
from tests.e2e.e2e_support import assert_one_baked_message as assert_baked
from tests.terminal import Terminal

SOURCE_ID = "compacted-source-1"
PROBE_ID = "probe-session-1"
SHADOWED = ("SHADOWED OLD USER", "SHADOWED OLD ASSISTANT")
RETAINED = "Recent retained question."
CHECKPOINT = "<compacted-summary>Retained checkpoint.</compacted-summary>"
REPLY = "Combined reference request accepted."
# OSC 2 (set the window title), an SGR colour, and a C1 CSI erase-display.
PROBE_TITLE = "probe\x1b]2;pwned\x07\x1b[31mred\x9b2Jend"
PROBE_SHOWN = r"probe\x1b]2;pwned\x07\x1b[31mred\x9b2Jend"
DEADLINE = 30.0


def _text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def _turn(session: Session, turn: int, user: str, assistant: str | None) -> None:
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    session.append("user/message", {"content": [_text(user)], "source": {"kind": "user"}}, surface_op="append")
    if assistant is not None:
        session.append("step/start", {"turn": turn, "step": 1})
        data = {"turn": turn, "step": 1, "content": [_text(assistant)], "provenance": {"provider": "x", "model": "y"}}
        session.append("assistant/message", data, surface_op="append")
        session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _build_data_dir(make_host: HostFactory, data: Path, cwd: Path) -> None:
    """The compacted source and the probe session, written with the store API."""
    host = make_host(data_dir=data)
    try:
        source = host.sessions.create(str(cwd), SOURCE_ID, created_at=1_000)
        _turn(source, 1, *SHADOWED)
        first, last = (e.seq for e in source.events if e.type in ("user/message", "assistant/message"))
        source.append("turn/start", {"turn": 2, "trigger": {"kind": "compact", "source": {"kind": "user"}}})
        start = source.append("compact/start", {"turn": 2})
        source.append(
            "user/message",
            {"content": [_text(CHECKPOINT)], "source": COMPACT_SOURCE},
            surface_op={"op": "replace", "start": first, "end": last},
            sources=[start.seq, first, last],
        )
        source.append("compact/end", {"turn": 2})
        source.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        _turn(source, 3, RETAINED, None)
        source.append("turn/start", {"turn": 4, "trigger": {"kind": "session-title"}})
        source.append("session/title", {"title": "Compacted source", "messageSeqs": [], "source": "test"})
        source.append("turn/end", {"turn": 4, "reason": {"kind": "completed"}})
        host.store.append(source.header, source.pending)

        probe = host.sessions.create("/elsewhere", PROBE_ID, created_at=500)
        _turn(probe, 1, "probe body", None)
        probe.append("session/title", {"title": PROBE_TITLE, "messageSeqs": [1], "source": "test"})
        host.store.append(probe.header, probe.pending)
    finally:
        host.close()


@pytest.fixture
def workspace(make_host: HostFactory, tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    _build_data_dir(make_host, tmp_path / "data", path.resolve())
    return path


@pytest.fixture
def terminal(tmp_path: Path, workspace: Path) -> Iterator[Terminal]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": REPLY}]), encoding="utf-8")
    env = clean_env(tmp_path, DSH_HOME=str(tmp_path / "data"), DSH_SCRIPT=str(script), TERM="xterm-256color")
    term = Terminal(dsh_command(), cwd=workspace, env=env)
    try:
        yield term
    finally:
        term.close()


@pytest.mark.foreign_logs  # a hand-built log (no turns), not one dsh wrote
def test_mention_a_compacted_session_in_a_real_terminal(
    terminal: Terminal, make_host: HostFactory, tmp_path: Path
) -> None:
    screen = terminal.wait_for("features: fs-read, retention, compact, session-reference")
    assert "scripted model (keyless)" in screen
    target_id = screen.split("session ", 1)[1].split()[0]
    assert target_id not in (SOURCE_ID, PROBE_ID)
    original_title = terminal.title()
    assert original_title == f"dsh · {target_id}"
    # Control: in this tmux a raw OSC 2 written to a pane does retitle it, so the checks below bite.
    terminal.open_window("control", r"printf '\033]2;control-pwned\007'; exec cat")
    terminal.wait_until(lambda: terminal.title("control") == "control-pwned", "the control pane's retitle")

    # The control-character probe: the hostile title is inert text in the completion menu.
    terminal.type("@probe")
    screen = terminal.wait_for(f"Session · {PROBE_SHOWN}")
    assert f"{PROBE_ID} · /elsewhere · " in screen
    assert "pwned" not in terminal.title()
    assert terminal.title() == original_title
    terminal.press("C-c")  # clears the editor
    terminal.wait_until(lambda: "› @probe" not in terminal.screen(), "clearing the editor")

    # Mention the compacted source through the menu, then submit.
    terminal.type("Use @Compacted")
    screen = terminal.wait_for("Session · Compacted source")
    # The menu shows as much of the description (id, cwd, creation time) as fits.
    assert f"Compacted source  {SOURCE_ID} · {terminal_cwd(tmp_path)[:20]}" in screen
    terminal.press("Tab")
    terminal.wait_for("Use @[Compacted source](dsh-session:")
    terminal.press("Enter")
    terminal.wait_for(REPLY)
    # The reply streams into the live area before the turn ends: wait for the idle status line.
    terminal.wait_until(lambda: "running · Esc to cancel" not in terminal.screen(), "the turn's end")
    screen = terminal.wait_for(f"Referenced sessions · Compacted source ({SOURCE_ID})")
    assert "Use @Compacted source" in screen
    for hidden in (*SHADOWED, "referenced-sessions", "Retained checkpoint."):
        assert hidden not in screen
    # The turn titled the session after its prompt's display text; the window follows.
    terminal.wait_until(lambda: terminal.title() == "dsh · Use @Compacted source", "the session's title")

    terminal.type("/quit")
    terminal.press("Enter")
    screen = terminal.wait_for("[dsh exited 0]")
    assert "Traceback" not in screen

    # The stored log of the new session, read after the process is gone.
    host = make_host(data_dir=tmp_path / "data")
    try:
        ids = {row.id for row in host.store.list_sessions()}
        assert ids == {SOURCE_ID, PROBE_ID, target_id}
        header, lines = host.store.read_lines(target_id)
    finally:
        host.close()
    assert header.cwd == terminal_cwd(tmp_path)
    log = [json.loads(line) for line in lines]
    data = assert_baked(log, "Use @Compacted source")
    (prefix,) = data["envelope"]["prefixContexts"]
    assert prefix["source"] == REFERENCE_SOURCE
    (reference,) = prefix["meta"]["references"]
    assert reference["sessionId"] == SOURCE_ID and reference["compacted"] is True
    snapshot = data["content"][0]["text"]
    assert "\\u003ccompacted-summary>Retained checkpoint.\\u003c/compacted-summary>" in snapshot
    assert RETAINED in snapshot
    for line in lines:
        for shadowed in SHADOWED:
            assert shadowed not in line
    assert [e["data"]["reason"]["kind"] for e in log if e["type"] == "turn/end"] == ["completed"]


@pytest.mark.foreign_logs  # the same hand-built logs
def test_tab_typed_right_after_the_text_chooses_the_first_row_of_its_answer(terminal: Terminal) -> None:
    terminal.wait_for("features: fs-read, retention, compact, session-reference")
    # Tab follows the last key at once: it lands while the menu's answer is still being fetched.
    terminal.type_keys("Use @Compacted")
    terminal.press("Tab")
    terminal.wait_for("Use @[Compacted source](dsh-session:")
    terminal.press("C-c")
    terminal.wait_until(lambda: "Use @[" not in terminal.screen(), "clearing the editor")
    # Again, Tab once the row shows: it may show from an earlier key's answer while a later key's is fetched.
    terminal.type_keys("Use @Compacted")
    terminal.wait_for("Session · Compacted source")
    terminal.press("Tab")
    terminal.wait_for("Use @[Compacted source](dsh-session:")
    terminal.press("C-u")
    terminal.type("/quit")
    terminal.press("Enter")
    assert "Traceback" not in terminal.wait_for("[dsh exited 0]")


def terminal_cwd(tmp_path: Path) -> str:
    return str((tmp_path / "workspace").resolve())


def test_a_configured_model_without_its_key_is_named_and_nothing_is_sent(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "dsh.toml").write_text('[host]\nmodel = "openai:deepseek-chat"\n')
    env = clean_env(tmp_path, DSH_HOME=str(tmp_path / "data"), TERM="xterm-256color")
    problem = 'model "openai:deepseek-chat" needs an API key: set DEEPSEEK_API_KEY'
    term = Terminal(dsh_command(), cwd=work, env=env, width=160)
    try:
        screen = term.wait_for(f"{problem}; messages are not sent until then")
        assert "openai:deepseek-chat  •  session" in screen and "scripted model" not in screen
        assert "@ mentions files and sessions" in screen
        term.type("hello there")
        term.press("Enter")
        screen = term.wait_for(f"Message not sent: {problem}")
        term.press("C-u")
        term.type("/quit")
        term.press("Enter")
        screen = term.wait_for("[dsh exited 0]")
    finally:
        term.close()
    assert "Scripted reply" not in screen
    # Nothing was written: the session the chat opened never got an event, so it was never stored.
    listed = run_dsh(["sessions", "list", "--json"], env={**env, "DSH_LOAD_PLUGINS": ""}, cwd=work)
    assert (listed.returncode, listed.stdout) == (0, "")
