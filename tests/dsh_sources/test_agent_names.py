"""Whose session is it: a source's sessions carry its agent's display name in every view.

The `@` menu (a real terminal, 80 columns), `dsh sessions list|search`, `dsh ref candidates` and
`dsh mcp`'s results name the agent (`Claude Code`, `Codex`); dsh's own sessions keep `Session`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_host.mcp.catalog import SessionCatalog
from dsh_host.testing import HostFactory, LogBuilder
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.dsh_sources.conftest import AgentDirs
from tests.e2e.e2e_support import clean_env, dsh_command, run_dsh
from tests.terminal import Terminal

CWD = "/work/parsers"


def _agents(dirs: AgentDirs) -> tuple[str, str]:
    """A Claude Code session titled "Parser in Claude" and a Codex one titled "Parser in Codex"."""
    t = ClaudeTranscript(cwd=CWD)
    t.user("look at the parser")
    t.reply(("text", "Looked."))
    t.custom_title("Parser in Claude")
    t.write(dirs.claude)
    r = CodexRollout(cwd=CWD)
    r.meta()
    r.context()
    r.turn_context()
    r.user("parser again")
    r.assistant("Done.")
    r.thread_name("Parser in Codex")
    r.write(dirs.codex)
    return f"claude-code:{t.session_id}", f"codex:{r.session_id}"


def _dsh_session(make_host: HostFactory, data: Path) -> None:
    """dsh's own session titled "Parser in dsh"."""
    host = make_host(data_dir=data)
    session = host.sessions.create(CWD, "dsh-parser", created_at=1_000)
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    session.append(
        "user/message", {"content": [LogBuilder.text("parse")], "source": {"kind": "user"}}, surface_op="append"
    )
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2, "trigger": {"kind": "session-title"}})
    session.append("session/title", {"title": "Parser in dsh", "messageSeqs": [1], "source": "test"})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    host.store.append(session.header, session.pending)
    host.close()


@pytest.fixture
def workspace(tmp_path: Path, make_host: HostFactory, agent_dirs: AgentDirs) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "dsh.toml").write_text(
        '[host]\nplugins = ["compact", "session-reference", "claude-code", "codex"]\n'
        f'[sources.claude-code]\ndir = "{agent_dirs.claude}"\n[sources.codex]\ndir = "{agent_dirs.codex}"\n'
    )
    _dsh_session(make_host, tmp_path / "data")
    return work


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, DSH_HOME=str(tmp_path / "data"), TERM="xterm-256color")


@pytest.fixture
def terminal(agent_dirs: AgentDirs, workspace: Path, env: dict[str, str]) -> Iterator[Terminal]:
    _agents(agent_dirs)
    # A listing builds the sources' index, so the menu lists them at once (not "indexing").
    assert run_dsh(["sessions", "list"], env=env, cwd=workspace).returncode == 0
    term = Terminal(dsh_command(), cwd=workspace, env=env, width=80)
    try:
        yield term
    finally:
        term.close()


def test_the_menu_names_each_sessions_agent_at_80_columns(terminal):
    terminal.wait_for("features:")
    terminal.type("@Parser")
    terminal.wait_for("Session · Parser in dsh")
    terminal.wait_for("Claude Code · Parser in Claude")
    screen = terminal.wait_for("Codex · Parser in Codex")
    assert "Session · Parser in Claude" not in screen and "Session · Parser in Codex" not in screen
    terminal.press("C-c")
    terminal.type("/quit")
    terminal.press("Enter")
    assert "Traceback" not in terminal.wait_for("[dsh exited 0]")


def test_sessions_list_and_search_name_the_agent(agent_dirs, workspace, env):
    claude_id, codex_id = _agents(agent_dirs)
    done = run_dsh(["sessions", "list"], env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    titles = sorted(line.split("  ")[-1] for line in done.stdout.splitlines())
    assert titles == ["Claude Code · Parser in Claude", "Codex · Parser in Codex", "Parser in dsh"]
    done = run_dsh(["sessions", "list", "--json"], env=env, cwd=workspace)
    agents = {row["id"]: row.get("agent") for row in map(json.loads, done.stdout.splitlines())}
    assert agents == {claude_id: "Claude Code", codex_id: "Codex", "dsh-parser": None}
    done = run_dsh(["sessions", "search", "Parser in Codex"], env=env, cwd=workspace)
    assert done.stdout.splitlines()[0].endswith("Codex · Parser in Codex")
    done = run_dsh(["ref", "candidates", "--target", "dsh-parser", "Parser in Claude"], env=env, cwd=workspace)
    assert done.stdout.splitlines() == [f"{claude_id}  {CWD}  Claude Code · Parser in Claude"]


async def test_mcp_results_name_the_agent(source_host, agent_dirs):
    claude_id, codex_id = _agents(agent_dirs)
    host = source_host("session-reference")
    catalog = SessionCatalog(host.services.session_query, host.services.session_references)
    found = {session.id: session.to_json() for session in await catalog.search("Parser", None, 10)}
    assert (found[claude_id]["agent"], found[codex_id]["agent"]) == ("Claude Code", "Codex")
    listed = {session.id: session.agent for session in await catalog.search("", None, 10)}
    assert listed == {claude_id: "Claude Code", codex_id: "Codex"}
    resources = {resource.uri: resource.description for resource in (await catalog.page(None)).resources}
    assert sum(text.startswith("Claude Code session (read-only source)") for text in resources.values()) == 1
