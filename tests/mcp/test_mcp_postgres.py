"""`dsh mcp` on the PostgreSQL store: the connecting role's visibility and nothing more, a
database that goes away (a tool error, then the next call works once it is back), and an end
that does not wait for a query the database holds up."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from psycopg import conninfo

from dsh_host.mcp.cli import session_catalog
from dsh_host.mcp.server import build_server
from dsh_host.session.events import SessionHeader
from dsh_session_reference import encode_uri
from tests.mcp.test_mcp_stdio import McpProcess
from tests.processes import dsh_command, hermetic_env
from tests.proxy import Proxy

# Its sessions are imported by hand.
pytestmark = pytest.mark.foreign_logs


def write_config(path: Path, dsn: str) -> Path:
    """A configuration with the PostgreSQL store at `dsn` and the default plugins."""
    path.write_text(
        f'[host]\nstore = "postgres"\ndata_dir = "{path.parent / "data"}"\n[stores.postgres]\ndsn = "{dsn}"\n'
    )
    return path


def stored(store, *session_ids: str) -> None:
    for session_id in session_ids:
        store.import_log(SessionHeader(id=session_id, created_at=1, cwd="/w"), [])


@pytest.fixture
def team(postgres_server, postgres_database):
    """alice and bob in group `team`; bob's sessions: one private, one shared with the team."""
    group = postgres_server.role("team", login=False)
    alice = postgres_server.role("alice", member_of=(group,))
    bob = postgres_server.role("bob", member_of=(group,))
    bobs = postgres_database.open(bob)
    try:
        stored(bobs, "bobs-private", "bobs-shared")
        bobs.share("bobs-shared", group)
    finally:
        bobs.close()
    alices = postgres_database.open(alice)
    try:
        stored(alices, "alices")
    finally:
        alices.close()
    return postgres_database.dsn(alice)


async def test_a_role_sees_its_own_and_shared_sessions_and_nothing_rls_hides(make_host, team):
    host = make_host(
        ["session-reference"], config={"host": {"store": "postgres"}, "stores": {"postgres": {"dsn": team}}}
    )
    async with Client(build_server(session_catalog(host))) as client:
        found = (await client.call_tool("search_sessions", {"query": ""})).structured_content["sessions"]
        assert sorted(s["id"] for s in found) == ["alices", "bobs-shared"]
        for query in ("bobs", "private"):
            names = (await client.call_tool("search_sessions", {"query": query})).structured_content["sessions"]
            assert [s["id"] for s in names] == (["bobs-shared"] if query == "bobs" else [])
        listed = await client.list_resources()
        assert sorted(r.uri for r in listed.resources) == sorted(map(encode_uri, ["alices", "bobs-shared"]))

        assert not (await client.call_tool("read_sessions", {"references": ["bobs-shared", "alices"]})).is_error
        hidden = await client.call_tool("read_sessions", {"references": ["alices", "bobs-private"]})
        missing = await client.call_tool("read_sessions", {"references": ["alices", "nobodys"]})
        assert hidden.is_error and missing.is_error
        # A hidden session reads exactly like one that does not exist.
        assert hidden.content[0].text == missing.content[0].text.replace("nobodys", "bobs-private")
        for uri in (encode_uri("bobs-private"), encode_uri("nobodys")):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert (caught.value.error.code, caught.value.error.data) == (-32602, {"uri": uri})


def _with_proxy(dsn: str, proxy: Proxy, pgpass: Path) -> str:
    """`dsn` through `proxy`, its role's password also given for the proxy's address."""
    params = conninfo.conninfo_to_dict(dsn)
    host, port, role = params["host"], str(params["port"]), params["user"]
    (password,) = [
        line.rsplit(":", 1)[1]
        for line in pgpass.read_text().splitlines()
        if line.startswith(f"{host}:{port}:*:{role}:")
    ]
    with pgpass.open("a") as fh:
        fh.write(f"127.0.0.1:{proxy.port}:*:{role}:{password}\n")
    return conninfo.make_conninfo(dsn, host="127.0.0.1", port=proxy.port)


async def test_a_database_gone_is_a_tool_error_and_the_next_call_works_once_it_is_back(postgres_server, team, tmp_path):
    proxy = Proxy(postgres_server.host_port)
    try:
        config = write_config(tmp_path / "dsh.toml", _with_proxy(team, proxy, postgres_server.pgpass))
        env = hermetic_env(tmp_path, DSH_CONFIG=str(config))
        params = StdioServerParameters(command=dsh_command()[0], args=["mcp"], env=env, cwd=str(tmp_path))
        with (tmp_path / "stderr.txt").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                search = {"query": "alices"}
                assert not (await client.call_tool("search_sessions", search)).is_error
                proxy.cut()
                for tool, arguments in (("search_sessions", search), ("read_sessions", {"references": ["alices"]})):
                    failed = await client.call_tool(tool, arguments)
                    assert failed.is_error
                    (line,) = failed.content[0].text.splitlines()
                    assert "PostgreSQL store" in line
                    proxy.restore()
                    again = await client.call_tool(tool, arguments)
                    assert not again.is_error, again.content[0].text
                    proxy.cut()
    finally:
        proxy.cut()


@pytest.fixture
def held(postgres_server, postgres_database, tmp_path):
    """`dsh mcp` on a database whose sessions table another transaction holds locked, so reads wait."""
    store = postgres_database.open()
    stored(store, "held")
    store.close()
    admin = postgres_server.admin(postgres_database.name)
    admin.autocommit = False
    admin.execute("LOCK TABLE dsh.sessions IN ACCESS EXCLUSIVE MODE")
    config = write_config(tmp_path / "dsh.toml", postgres_database.dsn())
    try:
        yield McpProcess(tmp_path, DSH_CONFIG=str(config)), postgres_database.name
    finally:
        admin.rollback()
        admin.close()


def _wait_for_a_blocked_read(postgres_server, dbname: str) -> None:
    """Synchronisation with the server process: its read has reached the database and waits there."""
    with postgres_server.admin() as watcher:
        for _ in range(3000):
            blocked = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'", (dbname,)
            ).fetchone()[0]
            if blocked:
                return
            time.sleep(0.01)
    raise AssertionError("the read never reached the database")


@pytest.mark.parametrize("end", ["sigterm", "eof"])
def test_the_end_does_not_wait_for_a_read_the_database_holds_up(postgres_server, held, end):
    mcp, dbname = held
    mcp.initialize()
    mcp.request(1, "tools/call", {"name": "read_sessions", "arguments": {"references": ["held"]}})
    _wait_for_a_blocked_read(postgres_server, dbname)
    if end == "sigterm":
        mcp.process.send_signal(signal.SIGTERM)
    code, rest, err = mcp.finish()
    assert code == 0
    assert all(frame.get("id") == 1 for frame in rest)  # if anything, the call's own answer
    assert [json.dumps(line) for line in err.splitlines() if "unfinished" in line] == [
        json.dumps("dsh: warning: mcp: leaving a store read or an index build unfinished")
    ]
