"""`dsh mcp` serves the sessions other agents keep (session sources) as it serves dsh's own: found
by search, read as the same framed snapshot a `@`-mention injects, listed and read as resources.

The sources are dsh_sources' Claude Code and Codex CLI plugins over files the test writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, stdio_client

from dsh_host import Host
from dsh_host.mcp.cli import session_catalog
from dsh_host.mcp.server import build_server
from dsh_host.text import iso_utc
from dsh_session_reference import encode_uri
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.processes import dsh_command, hermetic_env

pytestmark = pytest.mark.foreign_logs  # the stored session is written by hand


@pytest.fixture
def sources(make_host, tmp_path: Path) -> tuple[Host, dict[str, str], dict[str, int]]:
    """A host mounting both sources and session-reference; the ids of a Claude Code, a Codex and a
    dsh session, and the time each agent last wrote to its session."""
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    host = make_host(
        ["claude-code", "codex", "session-reference"],
        config={"sources": {"claude-code": {"dir": str(claude)}, "codex": {"dir": str(codex)}}},
    )
    transcript = ClaudeTranscript(cwd="/work/walrus")
    transcript.user("Which walrus log format did we pick?")
    transcript.reply(("text", "JSON lines, one event a line."))
    transcript.write(claude)
    rollout = CodexRollout(cwd="/work/walrus")
    rollout.meta()
    rollout.turn_context()
    rollout.user("rename the walrus module")
    rollout.assistant("Renamed.")
    rollout.write(codex)
    session = host.sessions.create("/work/dsh", "dsh-walrus", created_at=1)
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "walrus notes"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    ids = {
        "claude": f"claude-code:{transcript.session_id}",
        "codex": f"codex:{rollout.session_id}",
        "dsh": "dsh-walrus",
    }
    return host, ids, {"claude": transcript.clock, "codex": rollout.clock}


async def test_sessions_of_other_agents_are_found_read_and_listed(sources):
    host, ids, last_written = sources
    async with Client(build_server(session_catalog(host))) as client:
        found = (await client.call_tool("search_sessions", {"query": "walrus"})).structured_content["sessions"]
        by_id = {session["id"]: session for session in found}
        assert set(by_id) == set(ids.values())
        for agent in ("claude", "codex"):
            assert by_id[ids[agent]]["uri"] == encode_uri(ids[agent])
            assert by_id[ids[agent]]["lastActivityAt"] == iso_utc(last_written[agent])

        references = [by_id[ids[agent]]["mention"] for agent in ("claude", "codex", "dsh")]
        read = await client.call_tool("read_sessions", {"references": references})
        assert not read.is_error
        service = host.services.session_references
        parsed = [service.parse_reference(text) for text in references]
        (context,) = (await service.prepare(None, [], parsed)).contexts
        assert read.content[0].text == context["content"][0]["text"]
        assert [s["sessionId"] for s in read.structured_content["sources"]] == [ids["claude"], ids["codex"], ids["dsh"]]
        assert "JSON lines, one event a line." in read.content[0].text

        listed = (await client.list_resources()).resources
        records = await host.services.session_query.list_sessions()
        assert [r.uri for r in listed] == [encode_uri(record.id) for record in records]
        claude = next(r for r in listed if r.uri == encode_uri(ids["claude"]))
        assert "Claude Code session (read-only source)" in claude.description
        (contents,) = (await client.read_resource(claude.uri)).contents
        single = await client.call_tool("read_sessions", {"references": [ids["claude"]]})
        assert contents.text == single.content[0].text


async def test_with_no_configuration_dsh_mcp_serves_the_installed_sources(tmp_path):
    # The README's promise: installed is mounted, so `dsh mcp` with no configuration file and no
    # plugin list searches and reads the Claude Code sessions in the person's home.
    env = hermetic_env(tmp_path)
    transcript = ClaudeTranscript(cwd="/work/walrus")
    transcript.user("Which walrus log format did we pick?")
    transcript.reply(("text", "JSON lines, one event a line."))
    transcript.write(Path(env["CLAUDE_CONFIG_DIR"]))
    session_id = f"claude-code:{transcript.session_id}"
    params = StdioServerParameters(command=dsh_command()[0], args=["mcp"], env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.txt").open("w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            found = await client.call_tool("search_sessions", {"query": "walrus"})
            (session,) = found.structured_content["sessions"]
            assert (session["id"], session["agent"]) == (session_id, "Claude Code")
            read = await client.call_tool("read_sessions", {"references": [session_id]})
            assert "JSON lines, one event a line." in read.structured_content["snapshot"]
            assert [s["label"] for s in read.structured_content["sources"]] == ["Which walrus log format did we pick?"]
