"""End to end: one home holding Claude Code's, Codex's, Gemini CLI's and OpenCode's files, each
where the agent keeps them, and the `dsh-sources` plugins mounted from their installed entry
points (no configuration file).

`dsh sessions list|search|show`, `dsh ref preview`, the terminal UI's `@` menu (in tmux: the rows
name each agent, and choosing the Gemini CLI and OpenCode rows inserts mentions whose snapshots
go with the message) and `dsh mcp` (through the MCP TypeScript SDK's client) answer for the
Gemini CLI and OpenCode sessions beside the other two; what those agents never show (thoughts,
reasoning, tool calls and output, injected context, notes OpenCode added itself) stays out of
every answer. Each run ends by comparing every agent's folder with how it was before: every
file's and folder's bytes, mtime and mode, and no `-wal`, `-shm` or `-journal` file beside
OpenCode's database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dsh_session_reference import encode_uri, format_mention
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.dsh_sources.conftest import tree_state
from tests.dsh_sources.gemini_builders import GeminiChat, slug_folder
from tests.dsh_sources.opencode_builders import DatabaseWriter
from tests.e2e.e2e_support import PREFIX, clean_env, dsh_command, json_lines, ok, run_dsh
from tests.mcp.typescript_client import node_binary, run_ts_client
from tests.terminal import Terminal

REPLY = "Both walruses noted."
SHOWN = {
    "claude": ("Where does the walrus sleep?", "On the ice floe."),
    "codex": ("count the walrus herd", "Forty walruses."),
    "gemini": ("sketch the walrus tusks", "Tusks drawn in ivory.", "Ivory sketch done."),
    "opencode": ("weigh the walrus", "About a tonne of blubber."),
}
"""What each agent showed: prompts as typed and replies as shown."""
NEVER = (
    "GEMINI-THOUGHT",
    "GEMINI-TOOL-OUTPUT",
    "GEMINI-INFO",
    "session_context",
    "OPENCODE-SYNTHETIC",
    "OPENCODE-REASONING",
    "OPENCODE-TOOL-OUTPUT",
)
"""What Gemini CLI and OpenCode recorded but never showed as the conversation."""
TITLES = {
    "claude": "Claude Code · Walrus in Claude",
    "codex": "Codex · Walrus in Codex",
    "gemini": "Gemini CLI · Walrus in Gemini",
    "opencode": "OpenCode · Walrus in OpenCode",
}


@dataclass(frozen=True)
class FourAgents:
    """The folder dsh runs in (every session's cwd), its environment, and each agent's folder and session id."""

    work: Path
    env: dict[str, str] = field(repr=False)
    folders: dict[str, Path]
    ids: dict[str, str]

    def state(self) -> dict[str, dict[str, tuple[bytes, int, int]]]:
        return {agent: tree_state(folder) for agent, folder in self.folders.items()}

    def assert_untouched(self, before: dict[str, dict[str, tuple[bytes, int, int]]]) -> None:
        """Every agent's folder as `before`; what changed (added, gone, other bytes, mtime or mode) is named."""
        after = self.state()
        changed = {
            agent: sorted(
                path for path in then.keys() | after[agent].keys() if then.get(path) != after[agent].get(path)
            )
            for agent, then in before.items()
        }
        assert not any(changed.values()), changed
        names = [path.name for path in self.folders["opencode"].rglob("*")]
        assert not [name for name in names if name.endswith(("-wal", "-shm", "-journal"))], names


def _claude(base: Path, cwd: str) -> str:
    """A Claude Code 2.x transcript: a prompt, a reply, a custom title."""
    t = ClaudeTranscript(cwd=cwd)
    t.user(SHOWN["claude"][0])
    t.reply(("text", SHOWN["claude"][1]))
    t.custom_title("Walrus in Claude")
    t.write(base)
    return f"claude-code:{t.session_id}"


def _codex(base: Path, cwd: str) -> str:
    """A Codex rollout: its metadata and injected context, a prompt, a reply, a thread name."""
    r = CodexRollout(cwd=cwd)
    for opening in (r.meta, r.context, r.turn_context):  # what Codex writes before the first prompt
        opening()
    r.user(SHOWN["codex"][0])
    r.assistant(SHOWN["codex"][1])
    r.thread_name("Walrus in Codex")
    r.write(base)
    return f"codex:{r.session_id}"


def _gemini(base: Path, cwd: str) -> str:
    """A v0.44 session: the start-up context, a prompt, a reply with a thought, a tool call, a reply, an info."""
    chat = GeminiChat(root=cwd)
    chat.session_context()
    prompt, first, second = SHOWN["gemini"]
    chat.user(prompt)
    chat.gemini(first, thought="GEMINI-THOUGHT")
    chat.tool_call(output="GEMINI-TOOL-OUTPUT")
    chat.gemini(second)
    chat.info("GEMINI-INFO")
    chat.summary("Walrus in Gemini")
    chat.write(slug_folder(base, cwd, "work"))
    return f"gemini-cli:{chat.session_id}"


def _opencode(base: Path, cwd: str) -> str:
    """A session in `opencode.db` (closed, as OpenCode leaves it): a prompt with a synthetic note, a reply."""
    base.mkdir(parents=True)
    db = DatabaseWriter(base / "opencode.db")
    sid = db.session(cwd, "Walrus in OpenCode")
    prompt = db.user(sid, SHOWN["opencode"][0], synthetic=("OPENCODE-SYNTHETIC",))
    db.assistant(
        sid,
        prompt,
        (SHOWN["opencode"][1],),
        reasoning="OPENCODE-REASONING",
        tool_output="OPENCODE-TOOL-OUTPUT",
        cwd=cwd,
    )
    db.close()
    return f"opencode:{sid}"


@pytest.fixture
def agents(tmp_path: Path) -> FourAgents:
    work = (tmp_path / "work").resolve()
    work.mkdir()
    cwd = str(work)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": REPLY}]), encoding="utf-8")
    home = tmp_path / "home"
    # The agents' defaults under one home: ~/.claude, ~/.codex, ~/.gemini, ~/.local/share/opencode.
    env = clean_env(
        tmp_path,
        DSH_HOME=str(tmp_path / "data"),
        DSH_SCRIPT=str(script),
        TERM="xterm-256color",
        XDG_DATA_HOME=str(home / ".local" / "share"),
    )
    folders = {
        "claude": home / ".claude",
        "codex": home / ".codex",
        "gemini": home / ".gemini",
        "opencode": home / ".local" / "share" / "opencode",
    }
    ids = {
        "claude": _claude(folders["claude"], cwd),
        "codex": _codex(folders["codex"], cwd),
        "gemini": _gemini(folders["gemini"], cwd),
        "opencode": _opencode(folders["opencode"], cwd),
    }
    return FourAgents(work, env, folders, ids)


def _dsh(agents: FourAgents, *args: str) -> str:
    return ok(run_dsh(list(args), env=agents.env, cwd=agents.work)).stdout


def _assert_shows_only_what_was_shown(text: str, *agents: str) -> None:
    for agent in agents:
        for shown in SHOWN[agent]:
            assert shown in text, (agent, shown)
    for hidden in NEVER:
        assert hidden not in text, hidden


def _command_line(agents: FourAgents) -> None:
    """`dsh sessions list|search|show` and `dsh ref preview`."""
    ids = agents.ids
    rows = {row["id"]: row for row in json_lines(_dsh(agents, "sessions", "list", "--json"))}
    assert set(rows) == set(ids.values())
    assert {agent: (rows[ids[agent]]["source"], rows[ids[agent]]["agent"]) for agent in ids} == {
        "claude": ("claude-code", "Claude Code"),
        "codex": ("codex", "Codex"),
        "gemini": ("gemini-cli", "Gemini CLI"),
        "opencode": ("opencode", "OpenCode"),
    }
    assert {rows[session_id]["cwd"] for session_id in ids.values()} == {str(agents.work)}
    listed = _dsh(agents, "sessions", "list")
    assert sorted(line.split("  ")[-1] for line in listed.splitlines()) == sorted(TITLES.values())

    for agent, word in (("gemini", "ivory"), ("opencode", "blubber")):
        # One session found, its snippet indented below it.
        (found,) = [line for line in _dsh(agents, "sessions", "search", word).splitlines() if not line.startswith(" ")]
        assert found.startswith(ids[agent]) and found.endswith(TITLES[agent]), found
        _assert_shows_only_what_was_shown(_dsh(agents, "sessions", "show", ids[agent]), agent)
    walrus = [line for line in _dsh(agents, "sessions", "search", "walrus").splitlines() if not line.startswith(" ")]
    assert sorted(line.split("  ")[0] for line in walrus) == sorted(ids.values())

    _dsh(agents, "run", "hello")
    (target,) = [row["id"] for row in json_lines(_dsh(agents, "sessions", "list", "--json")) if "source" not in row]
    text = f"compare {format_mention(ids['gemini'], 'gemini')} with {format_mention(ids['opencode'], 'opencode')}"
    prepared = json.loads(_dsh(agents, "ref", "preview", "--target", target, text, "--json"))
    (context,) = prepared["contexts"]
    snapshot = context["content"][0]["text"]
    assert snapshot.startswith(PREFIX)
    _assert_shows_only_what_was_shown(snapshot, "gemini", "opencode")
    for agent in ("claude", "codex"):
        assert SHOWN[agent][1] not in snapshot


@pytest.fixture
def terminal(agents: FourAgents) -> Iterator[Terminal]:
    term = Terminal(dsh_command(), cwd=agents.work, env=agents.env, width=80)
    try:
        yield term
    finally:
        term.close()


def _menu(agents: FourAgents, terminal: Terminal) -> str:
    """The `@` menu names every agent's session; the Gemini CLI and OpenCode rows are chosen and sent.

    Returns the id of the chat's session.
    """
    screen = terminal.wait_for("features:")
    target = screen.split("session ", 1)[1].split()[0]
    terminal.type_keys("@Walrus")
    for title in TITLES.values():
        screen = terminal.wait_for(title)
    assert "indexing" not in screen  # the command line built the index: the menu answers from it at once
    terminal.press("C-c")
    terminal.wait_until(lambda: "@Walrus" not in terminal.screen(), "clearing the editor")

    _choose(terminal, "compare @Gemini", TITLES["gemini"], "compare @[Walrus in Gemini](dsh-session:")
    _choose(terminal, "with @OpenCode", TITLES["opencode"], "with @[Walrus in OpenCode](dsh-session:")
    terminal.press("Enter")
    terminal.wait_for(REPLY)
    terminal.wait_until(lambda: "running · Esc to cancel" not in terminal.screen(), "the turn's end")
    screen = terminal.wait_for("Referenced sessions · ")
    assert "compare @Walrus in Gemini with @Walrus in OpenCode" in screen.replace("\n", "")
    terminal.type("/quit")
    terminal.press("Enter")
    assert "Traceback" not in terminal.wait_for("[dsh exited 0]")
    return target


def _choose(terminal: Terminal, typed: str, row: str, inserted: str) -> None:
    """Type `typed` key by key, wait for its menu to show `row`, choose it, and wait for the mention `inserted`."""
    terminal.type_keys(typed)
    terminal.wait_until(lambda: _shows(terminal, typed, row), f"the menu of {typed!r}")
    terminal.press("Tab")
    terminal.wait_until(lambda: _shows(terminal, inserted), f"the mention {inserted!r}")


def _shows(terminal: Terminal, *texts: str) -> bool:
    """Whether one look at the screen shows every one of `texts` (its lines joined: the editor
    wraps a long mention at the terminal's width)."""
    screen = terminal.screen().replace("\n", "")
    return all(text in screen for text in texts)


def _sent_snapshot(agents: FourAgents, target: str) -> str:
    """The snapshot the chat's message carried, from its stored log (`dsh sessions export`)."""
    log = json_lines(_dsh(agents, "sessions", "export", target))
    (message,) = [event["data"] for event in log if event.get("type") == "user/message"]
    (prefix,) = message["envelope"]["prefixContexts"]
    references = [reference["sessionId"] for reference in prefix["meta"]["references"]]
    assert references == [agents.ids["gemini"], agents.ids["opencode"]]
    return message["content"][0]["text"]


def test_the_command_line_and_the_menu_answer_for_all_four_agents_and_change_nothing(agents, terminal):
    before = agents.state()
    _command_line(agents)
    target = _menu(agents, terminal)
    _assert_shows_only_what_was_shown(_sent_snapshot(agents, target), "gemini", "opencode")
    agents.assert_untouched(before)


def test_dsh_mcp_searches_and_reads_all_four_agents_and_changes_nothing(agents):
    node = node_binary()
    before = agents.state()
    ids = agents.ids
    request = {
        "command": dsh_command()[0],
        "args": ["mcp"],
        "env": agents.env,
        "query": "walrus",
        "references": [format_mention(ids["gemini"], "gemini"), ids["opencode"]],
        "failing": "opencode:ses_none",
    }
    seen = run_ts_client(node, request, agents.env)

    assert not seen["search"]["isError"]
    found = {session["id"]: session for session in seen["search"]["sessions"]}
    assert set(found) == set(ids.values())
    for agent, name in (("gemini", "Gemini CLI"), ("opencode", "OpenCode")):
        session = found[ids[agent]]
        assert (session["agent"], session["uri"], session["cwd"]) == (name, encode_uri(ids[agent]), str(agents.work))
    assert not seen["read"]["isError"]
    assert [source["sessionId"] for source in seen["read"]["sources"]] == [ids["gemini"], ids["opencode"]]
    assert [source["label"] for source in seen["read"]["sources"]] == ["gemini", "Walrus in OpenCode"]
    _assert_shows_only_what_was_shown(seen["read"]["text"], "gemini", "opencode")
    assert seen["failed"]["isError"] and "opencode:ses_none" in seen["failed"]["text"]
    listed = {resource["uri"]: resource["name"] for page in seen["pages"] for resource in page}
    assert listed == {encode_uri(session_id): TITLES[agent].split(" · ")[1] for agent, session_id in ids.items()}
    agents.assert_untouched(before)
