"""`dsh mcp` driven over stdio by two real MCP clients: the official Python SDK's (both of its
connection modes) and the official TypeScript SDK's on Node 22.

Each lists the tools, searches, reads three sessions, pages through every resource and reads
one. The TypeScript SDK and its Node are installed from tests/acp/node/package-lock.json
(`npm install --prefix tests/acp/node --no-save`, as `.ci/run` does) and found through
`$DSH_ACP_NODE_BIN`; without them its test skips locally, naming the command, and fails in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client

from dsh_host.mcp.catalog import PAGE_SIZE
from dsh_session_reference import encode_uri, format_mention
from tests.mcp.corpus import Corpus, import_many, write_corpus
from tests.mcp.typescript_client import node_binary, run_ts_client
from tests.processes import dsh_command, hermetic_env

# Sessions written by agents on the scripted model; bulk sessions are imported empty.
pytestmark = pytest.mark.foreign_logs

BULK = PAGE_SIZE + 30


@pytest.fixture
def titles() -> dict[str, str | None]:
    """The stored sessions' titles by id (filled by `stored`)."""
    return {}


@pytest.fixture
async def stored(make_host, tmp_path, titles) -> tuple[Corpus, list[str], dict[str, str]]:
    """The corpus and `BULK` more sessions in a store, and the environment `dsh mcp` serves it in."""
    data = tmp_path / "data"
    host = make_host(["compact", "session-reference"], data_dir=data)
    corpus = await write_corpus(host)
    import_many(host, BULK)
    rows = host.store.list_sessions()
    listing = [row.id for row in rows]
    titles.update((row.id, row.title) for row in rows)
    return corpus, listing, hermetic_env(tmp_path, DSH_HOME=str(data))


def mentions(corpus: Corpus) -> list[str]:
    """The three sessions read, named three ways: a mention with a label, a URI, an id."""
    return [format_mention(corpus.compacted, "storage"), encode_uri(corpus.hostile), corpus.long]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_python_sdk_client_searches_reads_and_pages(stored, titles, tmp_path, mode):
    corpus, listing, env = stored
    params = StdioServerParameters(command=dsh_command()[0], args=["mcp"], env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.txt").open("w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["search_sessions", "read_sessions"]

            found = await client.call_tool("search_sessions", {"query": "walrus", "cwd": "/work/long"})
            assert not found.is_error
            assert [s["id"] for s in found.structured_content["sessions"]] == [corpus.long, corpus.compacted]

            read = await client.call_tool("read_sessions", {"references": mentions(corpus)})
            assert not read.is_error
            (block,) = read.content
            assert block.text == read.structured_content["snapshot"]
            # A mention keeps its label; a URI or an id is labelled with the session's title.
            labels = [s["label"] for s in read.structured_content["sources"]]
            assert labels == ["storage", titles[corpus.hostile], titles[corpus.long]]

            failed = await client.call_tool("read_sessions", {"references": [corpus.long, "ghost"]})
            assert failed.is_error and 'session "ghost" not found' in failed.content[0].text

            uris, cursor = [], None
            while True:
                page = await client.list_resources(cursor=cursor)
                uris.extend(resource.uri for resource in page.resources)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert uris == [encode_uri(session_id) for session_id in listing]

            (contents,) = (await client.read_resource(encode_uri(corpus.compacted))).contents
            assert contents.text.startswith("## Referenced sessions\n")
            with pytest.raises(MCPError) as caught:
                await client.read_resource(encode_uri("ghost"))
            assert caught.value.error.code == -32602
        errlog.seek(0)
        assert errlog.read() == ""  # nothing worth a log line happened


@pytest.fixture
def node() -> Path:
    return node_binary()


async def test_the_typescript_sdk_client_searches_reads_and_pages(stored, tmp_path, node):
    corpus, listing, env = stored
    request = {
        "command": dsh_command()[0],
        "args": ["mcp"],
        "env": env,
        "query": "walrus",
        "references": mentions(corpus),
        "failing": "dsh-session:!!",
    }
    seen = run_ts_client(node, request, env)

    assert seen["server"] == {"name": "dsh", "title": "dsh sessions", "version": "0.1.0"}
    assert "never instructions" in seen["instructions"]
    assert seen["tools"] == [
        {"name": "search_sessions", "readOnly": True, "required": ["query"], "hasOutputSchema": True},
        {"name": "read_sessions", "readOnly": True, "required": ["references"], "hasOutputSchema": True},
    ]
    assert not seen["search"]["isError"]
    assert {s["id"] for s in seen["search"]["sessions"]} == {corpus.long, corpus.compacted}
    assert not seen["read"]["isError"]
    assert [s["sessionId"] for s in seen["read"]["sources"]] == corpus.referenced
    assert seen["failed"] == {
        "isError": True,
        "text": 'invalid session reference URI "dsh-session:!!" (SESSION_REFERENCE_INVALID_REFERENCE)',
    }
    assert seen["unknownTool"] == {"code": -32602, "data": None}
    assert [len(page) for page in seen["pages"]] == [PAGE_SIZE, len(listing) - PAGE_SIZE]
    assert [resource["uri"] for page in seen["pages"] for resource in page] == [encode_uri(i) for i in listing]
    assert seen["resource"]["uri"] == encode_uri(listing[0])
    assert seen["resource"]["mimeType"] == "text/plain"
    assert seen["unknownResource"] == {"code": -32602, "data": {"uri": "dsh-session:bm8"}}

    # The same bytes as the Python SDK client reads, and as the snapshot of one session.
    params = StdioServerParameters(command=dsh_command()[0], args=["mcp"], env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            read = await client.call_tool("read_sessions", {"references": mentions(corpus)})
            (contents,) = (await client.read_resource(encode_uri(listing[0]))).contents
    assert seen["read"]["text"] == read.content[0].text
    assert seen["resource"]["text"] == contents.text
