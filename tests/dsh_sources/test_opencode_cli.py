"""The `opencode` source through the `dsh` command: list, show, reference, export, check, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dsh_sources.conftest import tree_state
from tests.dsh_sources.opencode_builders import DatabaseWriter, StorageWriter

pytestmark = pytest.mark.foreign_logs  # an imported copy is a synthesized log (surface events, no turns)


@pytest.fixture
def opencode(opencode_installed, tmp_path: Path, dsh_cli) -> tuple[Path, str]:
    data = tmp_path / "share" / "opencode"
    data.mkdir(parents=True)
    dsh_cli.plugins = ["session-reference", "compact", "opencode"]
    dsh_cli.env["XDG_DATA_HOME"] = str(data.parent)
    db = DatabaseWriter(data / "opencode.db")
    sid = db.session(str(tmp_path), "Fix the parser")
    prompt = db.user(sid, "where is the parser?", synthetic=("Called the Read tool",))
    db.assistant(sid, prompt, ("In lines.py.",), reasoning="secret thoughts", tool_output="lines.py")
    db.close()
    return data, f"opencode:{sid}"


def test_list_show_and_reference_an_opencode_session(dsh_cli, opencode):
    data, sid = opencode
    before = tree_state(data)
    code, out, err = dsh_cli("sessions", "list", "--json")
    assert code == 0, err
    (row,) = map(json.loads, out.splitlines())
    assert (row["id"], row["source"], row["title"]) == (sid, "opencode", "Fix the parser")
    code, out, err = dsh_cli("sessions", "list")
    assert out.rstrip().endswith("OpenCode · Fix the parser"), out
    code, out, err = dsh_cli("sessions", "show", sid)
    assert code == 0 and "where is the parser?" in out and "In lines.py." in out
    assert "secret thoughts" not in out and "Called the Read tool" not in out
    assert dsh_cli("run", "hello").exit_code == 0
    target = next(
        row["id"]
        for row in map(json.loads, dsh_cli("sessions", "list", "--json").stdout.splitlines())
        if "source" not in row
    )
    mention = dsh_cli("ref", "mention", sid, "--label", "oc").stdout.strip()
    code, out, err = dsh_cli("ref", "preview", "--target", target, f"see {mention}", "--json")
    assert code == 0, err
    text = json.loads(out)["contexts"][0]["content"][0]["text"]
    assert "In lines.py." in text and "secret thoughts" not in text
    code, out, err = dsh_cli("compact", sid)
    assert code != 0 and len(err.splitlines()) == 1
    assert tree_state(data) == before


def test_check_reports_a_corrupt_database_and_the_older_folder_still_lists(dsh_cli, opencode):
    data, _ = opencode
    (data / "opencode.db").write_bytes(b"garbage, not a database" * 10)
    storage = StorageWriter(data / "storage", seed=5)
    old = storage.session("/work/old", "old session")
    storage.user(old, "an old prompt")
    code, out, err = dsh_cli("sessions", "list", "--json")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [f"opencode:{old}"]
    code, out, err = dsh_cli("sessions", "check")
    assert code == 0, err  # a problem of a source is reported, not a finding of a session
    line = next(line for line in out.splitlines() if line.startswith("opencode  "))
    assert "opencode.db" in line and "not a SQLite database" in line


async def test_dsh_mcp_finds_and_reads_an_opencode_session(make_host, tmp_path: Path):
    from mcp import Client

    import dsh_sources.opencode as plugin
    from dsh_host.mcp.cli import session_catalog
    from dsh_host.mcp.server import build_server

    data = tmp_path / "oc"
    data.mkdir()
    db = DatabaseWriter(data / "opencode.db")
    sid = db.session("/work/walrus", "Walrus log format")
    prompt = db.user(sid, "Which walrus log format did we pick?")
    db.assistant(sid, prompt, ("JSON lines, one event a line.",), tool_output="walrus.log")
    db.close()
    host = make_host(
        ["session-reference"], objects={"opencode": plugin}, config={"sources": {"opencode": {"dir": str(data)}}}
    )
    async with Client(build_server(session_catalog(host))) as client:
        found = await client.call_tool("search_sessions", {"query": "walrus"})
        (session,) = found.structured_content["sessions"]
        assert (session["id"], session["agent"]) == (f"opencode:{sid}", "OpenCode")
        read = await client.call_tool("read_sessions", {"references": [f"opencode:{sid}"]})
        assert "JSON lines, one event a line." in read.structured_content["snapshot"]
        assert "walrus.log" not in read.structured_content["snapshot"]
