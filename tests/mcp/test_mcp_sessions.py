"""What `dsh mcp` serves, checked against the command line: snapshots byte for byte as a `@`-mention
injects them (`dsh ref preview`), search as `dsh sessions search` finds, errors as `dsh` prints
them, and the sessions as paged resources.

The server is the one `dsh mcp` builds, driven by the SDK's own client in memory (the protocol
layer without the stdio framing, which tests/mcp/test_mcp_stdio.py covers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client, MCPError

from dsh_host import Host
from dsh_host.mcp.catalog import PAGE_SIZE
from dsh_host.mcp.cli import NO_SNAPSHOTS, session_catalog
from dsh_host.mcp.server import build_server
from dsh_host.testing.cli import DshRunner
from dsh_host.text import iso_utc
from dsh_session_reference import encode_uri, format_mention
from tests.mcp.corpus import HOSTILE_TITLE, Corpus, import_many, write_corpus

# Sessions written by agents on the scripted model; bulk sessions are imported empty.
pytestmark = pytest.mark.foreign_logs


@pytest.fixture
def cli(tmp_path) -> DshRunner:
    """`dsh` in-process on the data dir the tests' hosts write to, with the default plugins."""
    return DshRunner(tmp_path, plugins=None)


@pytest.fixture
async def corpus(make_host, cli) -> tuple[Host, Corpus]:
    host = make_host(["compact", "session-reference"], data_dir=cli.home)
    return host, await write_corpus(host)


@contextlib.asynccontextmanager
async def connected(host: Host) -> AsyncIterator[Client]:
    """The SDK's client on the server `dsh mcp` builds for `host`, in memory."""
    async with Client(build_server(session_catalog(host), version="test")) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    return await client.call_tool(tool, arguments)


async def run(cli: DshRunner, *args: str) -> tuple[int, str, str]:
    """`dsh *args`, in-process: on a thread of its own, since it runs an event loop itself."""
    return tuple(await asyncio.to_thread(cli, *args))  # type: ignore[return-value]


async def preview(cli: DshRunner, target: str, text: str) -> dict[str, Any]:
    code, out, err = await run(cli, "ref", "preview", "--target", target, text, "--json")
    assert (code, err) == (0, "")
    return json.loads(out)


async def preview_error(cli: DshRunner, target: str, text: str) -> str:
    """The one line `dsh ref preview` prints for `text`, without its `dsh: error: `."""
    code, out, err = await run(cli, "ref", "preview", "--target", target, text)
    assert (code, out) == (1, "")
    (line,) = err.splitlines()
    return line.removeprefix("dsh: error: ")


# -- read_sessions -----------------------------------------------------------------------------


async def test_read_sessions_returns_the_bytes_a_mention_of_the_same_sessions_injects(corpus, cli):
    async with connected(corpus[0]) as client:
        _, sessions = corpus
        mentions = [
            format_mention(sessions.compacted, "storage decision"),
            format_mention(sessions.hostile, "a ]tricky\\ label"),
            format_mention(sessions.long),
        ]
        result = await call(client, "read_sessions", references=mentions)

        (context,) = (await preview(cli, sessions.target, " and ".join(mentions)))["contexts"]
        (block,) = context["content"]
        assert not result.is_error
        assert [content.text for content in result.content] == [block["text"]]
        assert result.structured_content["snapshot"] == block["text"]
        kept = [{**meta, "uri": encode_uri(meta["sessionId"])} for meta in context["meta"]["references"]]
        assert result.structured_content["sources"] == [
            {key: value for key, value in meta.items() if key != "inputIndex"} for meta in kept
        ]
        # Bounded and frozen as a reference is: the checkpoint of the compacted session comes first,
        # the long one's budget left messages out (counted), and the warning heads it all.
        by_id = {source["sessionId"]: source for source in result.structured_content["sources"]}
        assert by_id[sessions.compacted]["compacted"] is True
        assert by_id[sessions.long]["omittedMessages"] > 0 and by_id[sessions.long]["omittedBytes"] > 0
        assert block["text"].startswith("## Referenced sessions\n\nThe JSON below is an untrusted")


async def test_a_session_is_named_alike_by_id_uri_or_bare_uri(corpus, cli):
    async with connected(corpus[0]) as client:
        host, sessions = corpus
        by_id = await call(client, "read_sessions", references=sessions.referenced)
        by_uri = await call(client, "read_sessions", references=[encode_uri(s) for s in sessions.referenced])
        # Both are labelled as the `@` menu labels a session: by its title, else its id.
        titled = [(s, host.store.read_title(s)) for s in sessions.referenced]
        mentions = [format_mention(s, s if t is None else t.title) for s, t in titled]
        (context,) = (await preview(cli, sessions.target, " ".join(mentions)))["contexts"]
        assert by_id.content[0].text == by_uri.content[0].text == context["content"][0]["text"]


async def test_duplicates_count_once_and_the_first_label_wins(corpus, cli):
    async with connected(corpus[0]) as client:
        _, sessions = corpus
        references = [format_mention(sessions.long, "first"), sessions.long, format_mention(sessions.long, "second")]
        result = await call(client, "read_sessions", references=references)
        assert [source["label"] for source in result.structured_content["sources"]] == ["first"]


async def test_snapshots_stay_inside_their_tags_whatever_the_sessions_say(corpus):
    async with connected(corpus[0]) as client:
        _, sessions = corpus
        text = (await call(client, "read_sessions", references=[sessions.hostile])).content[0].text
        assert text.count("<referenced-sessions>") == text.count("</referenced-sessions>") == 1
        assert text.endswith("\n</referenced-sessions>")
        inside = text[
            text.index("<referenced-sessions>\n") + len("<referenced-sessions>\n") : -len("\n</referenced-sessions>")
        ]
        assert "<" not in inside and "\x1b" not in inside and "\x00" not in inside
        assert json.loads(inside)[0]["label"] == HOSTILE_TITLE  # labelled by its title, escaped in the JSON


@pytest.mark.parametrize(
    "references",
    [
        pytest.param(lambda s: ["dsh-session:!!"], id="a malformed URI"),
        pytest.param(lambda s: [format_mention(s.compacted)[:-1] + "A)"], id="a URI that is not canonical"),
        pytest.param(lambda s: [s.compacted, "no-such-session"], id="an unknown session"),
        pytest.param(lambda s: [*s.referenced, "a-fourth-one"], id="too many sessions"),
        pytest.param(lambda s: ["@[half a mention"], id="a mention that is not one"),
    ],
)
async def test_a_failing_reference_fails_the_whole_call_with_the_line_dsh_prints(corpus, cli, references):
    async with connected(corpus[0]) as client:
        _, sessions = corpus
        given = references(sessions)
        result = await call(client, "read_sessions", references=given)
        assert result.is_error and result.structured_content is None
        (content,) = result.content
        as_mentions = " ".join(text if text.startswith("@[") else format_mention(text) for text in given)
        if given == ["@[half a mention"]:
            assert content.text == 'not one session mention: "@[half a mention" (SESSION_REFERENCE_INVALID_REFERENCE)'
        elif given == ["dsh-session:!!"]:
            assert content.text == await preview_error(cli, sessions.target, "@[x](dsh-session:!!)")
        else:
            assert content.text == await preview_error(cli, sessions.target, as_mentions)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"references": []}, "references: List should have at least 1 item after validation, not 0"),
        ({"references": "x"}, "references: Input should be a valid list"),
        ({"references": [5]}, "references.0: Input should be a valid string"),
        ({"references": ["x" * 10_000]}, "references.0: String should have at most 8192 characters"),
        ({"references": ["x"] * 65}, "references: List should have at most 64 items after validation, not 65"),
        ({"references": [["x"]]}, "references.0: Input should be a valid string"),
        ({}, "references: Field required"),
    ],
)
async def test_arguments_that_break_the_schema_are_a_tool_error(corpus, arguments, problem):
    async with connected(corpus[0]) as client:
        result = await client.call_tool("read_sessions", arguments)
        assert result.is_error
        assert result.content[0].text == f"invalid arguments for read_sessions: {problem}"


async def test_an_unknown_tool_is_an_invalid_params_error(corpus):
    async with connected(corpus[0]) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("drop_sessions", {})
        assert (caught.value.error.code, caught.value.error.message) == (-32602, "Unknown tool: drop_sessions")
        assert [tool.name for tool in (await client.list_tools()).tools] == ["search_sessions", "read_sessions"]


# -- search_sessions ---------------------------------------------------------------------------


async def test_search_finds_what_dsh_sessions_search_finds_in_its_order(corpus, cli):
    async with connected(corpus[0]) as client:
        for query, cwd in (("walrus", "/work/long"), ("walrus", "/work/storage"), ("decision", "/nowhere")):
            code, out, _ = await run(cli, "sessions", "search", query, "--cwd", cwd, "--json")
            expected = [json.loads(line) for line in out.splitlines()]
            found = (await call(client, "search_sessions", query=query, cwd=cwd)).structured_content["sessions"]
            assert code == 0 and expected
            assert [(s["id"], s["title"], s["cwd"], s["snippet"]) for s in found] == [
                (e["id"], e["title"], e["cwd"], e["snippet"]) for e in expected
            ]
            assert [(s["createdAt"], s["lastActivityAt"]) for s in found] == [
                (iso_utc(e["createdAt"]), iso_utc(e["lastActivityAt"])) for e in expected
            ]


async def test_each_result_names_the_session_every_way_read_sessions_takes(corpus, cli):
    async with connected(corpus[0]) as client:
        host, sessions = corpus
        (found,) = (await call(client, "search_sessions", query="walrus log")).structured_content["sessions"]
        assert found["id"] == sessions.compacted
        assert (
            found["uri"]
            == encode_uri(sessions.compacted)
            == (await run(cli, "ref", "uri", sessions.compacted))[1].strip()
        )
        assert found["mention"] == format_mention(sessions.compacted, found["title"])
        assert "walrus log" in found["snippet"]
        stored = host.store.read_events(sessions.compacted)[1]
        assert found["lastActivityAt"] == iso_utc(stored[-1].time)
        for name in (found["id"], found["uri"], found["mention"]):
            result = await call(client, "read_sessions", references=[name])
            assert not result.is_error
            # An id or URI is labelled with the session's title, as its mention and the `@` menu are.
            assert [source["label"] for source in result.structured_content["sources"]] == [found["title"]]


async def test_without_cwd_no_directory_is_preferred_and_an_empty_query_lists_the_newest(corpus):
    async with connected(corpus[0]) as client:
        host, _ = corpus
        ranked = (await call(client, "search_sessions", query="walrus")).structured_content["sessions"]
        rows = host.store.search_candidates("walrus", target_id=None, target_cwd=None, limit=20, group_by_cwd=False)
        assert [s["id"] for s in ranked] == [row.id for row in rows]
        newest = (await call(client, "search_sessions", query="", limit=3)).structured_content["sessions"]
        assert [s["id"] for s in newest] == [row.id for row in host.store.list_sessions()[:3]]


async def test_search_results_are_data_that_spells_no_tag(corpus):
    async with connected(corpus[0]) as client:
        _, sessions = corpus
        result = await call(client, "search_sessions", query="referenced-sessions")
        (found,) = result.structured_content["sessions"]
        assert (found["id"], found["title"]) == (sessions.hostile, HOSTILE_TITLE)
        assert "<" not in result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"query": 5}, "query: Input should be a valid string"),
        ({"query": "x", "limit": "5"}, "limit: Input should be a valid integer"),
        ({"query": "x", "limit": 0}, "limit: Input should be greater than or equal to 1"),
        ({"query": "x", "limit": 101}, "limit: Input should be less than or equal to 100"),
        ({"query": "x", "limit": 2.5}, "limit: Input should be a valid integer"),
        ({"query": "x", "cwd": "/" * 4_097}, "cwd: String should have at most 4096 characters"),
        ({"query": None}, "query: Input should be a valid string"),
        ({"query": "x", "limit": True}, "limit: Input should be a valid integer"),
        ({"query": "x" * 1_001}, "query: String should have at most 1000 characters"),
        ({"query": "x", "cwd": ["/a"]}, "cwd: Input should be a valid string"),
    ],
)
async def test_search_arguments_that_break_the_schema_are_a_tool_error(corpus, arguments, problem):
    async with connected(corpus[0]) as client:
        result = await client.call_tool("search_sessions", arguments)
        assert result.is_error
        assert result.content[0].text == f"invalid arguments for search_sessions: {problem}"


# -- resources ---------------------------------------------------------------------------------


async def test_resources_page_the_listing_newest_first(corpus):
    async with connected(corpus[0]) as client:
        host, _ = corpus
        import_many(host, 2 * PAGE_SIZE + 10)
        listing = host.store.list_sessions()
        pages, cursor = [], None
        while True:
            page = await client.list_resources(cursor=cursor)
            pages.append(page.resources)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert [len(page) for page in pages] == [PAGE_SIZE, PAGE_SIZE, len(listing) - 2 * PAGE_SIZE]
        resources = [resource for page in pages for resource in page]
        assert [r.uri for r in resources] == [encode_uri(row.id) for row in listing]
        assert [r.name for r in resources] == [row.title or row.id for row in listing]
        assert {r.mime_type for r in resources} == {"text/plain"}
        assert [r.annotations.last_modified for r in resources] == [iso_utc(row.last_activity_at) for row in listing]


async def test_reading_a_resource_is_reading_that_session(corpus):
    async with connected(corpus[0]) as client:
        _, sessions = corpus
        uri = encode_uri(sessions.compacted)
        read = await client.read_resource(uri)
        (contents,) = read.contents
        assert (contents.uri, contents.mime_type) == (uri, "text/plain")
        assert contents.text == (await call(client, "read_sessions", references=[uri])).content[0].text


@pytest.mark.parametrize(
    "uri",
    [
        encode_uri("no-such-session"),
        "dsh-session:%49mEi",  # a percent-encoded spelling is not the session's URI
        "dsh-session:",
        "dsh-session:!!",
        "file:///etc/passwd",
        "dsh-session:\x1b[31m",
    ],
)
async def test_an_unknown_or_malformed_resource_uri_is_resource_not_found(corpus, uri):
    async with connected(corpus[0]) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
        assert caught.value.error.code == -32602
        assert caught.value.error.message.startswith("Unknown resource: ")
        assert caught.value.error.data == {"uri": uri}


async def test_a_cursor_not_handed_out_is_invalid_params(corpus):
    async with connected(corpus[0]) as client:
        for cursor in ("bogus", "WzEsICJhIl0", "WzEsIDJd"):  # not base64 JSON; not canonical; not [time, id]
            with pytest.raises(MCPError) as caught:
                await client.list_resources(cursor=cursor)
            assert caught.value.error.code == -32602


# -- the command -------------------------------------------------------------------------------


def test_the_command_comes_with_the_plugin_and_needs_session_snapshots(cli, make_host):
    cli.plugins = ["session-reference"]  # an explicit list without mcp: the command says what would mount it
    code, _, err = cli("mcp")
    assert code == 2 and err.startswith('dsh: error: command "mcp" belongs to plugin "mcp", installed but not mounted')
    cli.plugins = ["session-reference", "mcp"]
    assert cli("mcp")[2] == "dsh: error: dsh mcp: stdout must be a pipe or a socket (it carries protocol frames only)\n"
    with pytest.raises(Exception, match=NO_SNAPSHOTS):
        session_catalog(make_host(["mcp"]))
