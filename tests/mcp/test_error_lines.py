"""One cause per line: every error line of `dsh ref`, `dsh sessions` and `dsh mcp` names each cause once.

The reference words a failed read as `failed to read referenced session: <cause>` and keeps the
cause in its chain, so the chain, rendered whole, repeats it. The terminal UI's notice keeps that
chain as the reference prescribes; a command's line and an MCP tool error name the cause once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, MCPError

from dsh_host import ComposeError, Host
from dsh_host.mcp.cli import session_catalog
from dsh_host.mcp.server import build_server
from dsh_host.testing import DshRunner, HostFactory
from dsh_session_reference import format_mention

MISSING = 'session "nope" not found'
CODE = re.compile(r" \([A-Z_]+\)$")


def clauses(line: str) -> list[str]:
    """The `: `-separated clauses of an error line, without `dsh: error: ` and its code."""
    return CODE.sub("", line.removeprefix("dsh: error: ")).split(": ")


def assert_each_cause_once(line: str) -> None:
    found = clauses(line)
    repeated = sorted({clause for clause in found if found.count(clause) > 1})
    assert not repeated, f"{line!r} repeats {repeated}"


def test_the_check_catches_a_repeat() -> None:
    with pytest.raises(AssertionError, match="repeats"):
        assert_each_cause_once(f"dsh: error: failed to read referenced session: {MISSING}: {MISSING} (X_Y)")
    assert_each_cause_once(f"dsh: error: failed to read referenced session: {MISSING} (X_Y)")


@pytest.fixture
def dsh(dsh_cli: DshRunner) -> Iterator[tuple[DshRunner, str]]:
    """`dsh` with session-reference mounted, and the id of a stored session to target."""
    dsh_cli.plugins = ["compact", "session-reference"]
    code, _, err = dsh_cli("run", "hello")
    assert code == 0, err
    yield dsh_cli, err.splitlines()[-1].removeprefix("session: ")


def command_errors(dsh_cli: DshRunner, target: str, tmp_path: Path) -> Iterator[tuple[list[str], str]]:
    """(the command line, the one line it printed on stderr) for every error path walked."""
    (tmp_path / "not-a-log.jsonl").write_text("{not json\n")
    too_many = " ".join(format_mention(f"s{i}") for i in range(4))
    walked = [
        ["ref", "preview", "--target", target, format_mention("nope")],
        ["ref", "preview", "--target", target, f"see {format_mention('nope')} and {format_mention(target)}"],
        ["ref", "preview", "--target", target, format_mention(target)],
        ["ref", "preview", "--target", target, "@[x](dsh-session:!!)"],
        ["ref", "preview", "--target", target, too_many],
        ["ref", "preview", "--target", "nope", "hi"],
        ["ref", "parse", "@[x](dsh-session:xx)"],
        ["ref", "candidates", "--target", "nope"],
        ["ref", "candidates", "--target", target, "--limit", "0"],
        ["sessions", "show", "nope"],
        ["sessions", "show", "--surface", "nope"],
        ["sessions", "export", "nope"],
        ["sessions", "export"],
        ["sessions", "check", "nope"],
        ["sessions", "check", "--source", "nope"],
        ["sessions", "import", str(tmp_path / "absent.jsonl")],
        ["sessions", "import", str(tmp_path / "not-a-log.jsonl")],
        ["sessions", "search", "nothing-like-it"],
    ]
    for argv in walked:
        code, _, err = dsh_cli(*argv)
        assert code != 0, argv
        lines = err.splitlines()
        assert len(lines) == 1, (argv, err)
        yield argv, lines[0]


def test_every_command_error_names_each_cause_once(dsh, tmp_path: Path) -> None:
    dsh_cli, target = dsh
    lines = dict((" ".join(argv), line) for argv, line in command_errors(dsh_cli, target, tmp_path))
    for line in lines.values():
        assert_each_cause_once(line)
    preview = f"ref preview --target {target} {format_mention('nope')}"
    assert lines[preview] == f"dsh: error: failed to read referenced session: {MISSING} (SESSION_REFERENCE_READ_FAILED)"


async def test_every_mcp_tool_error_names_each_cause_once(make_host: HostFactory, dsh) -> None:
    dsh_cli, target = dsh
    host = make_host(["session-reference"], data_dir=dsh_cli.home)
    calls = [
        ["nope"],
        [target, "nope"],
        [format_mention("nope", "a label")],
        ["dsh-session:!!"],
        ["@[half a mention"],
        [target, "s1", "s2", "s3"],
    ]
    async with Client(build_server(session_catalog(host), version="test")) as client:
        texts = []
        for references in calls:
            result = await client.call_tool("read_sessions", {"references": references})
            assert result.is_error, references
            texts.append(result.content[0].text)
        with pytest.raises(MCPError) as caught:
            await client.read_resource("dsh-session:!!")
        texts.append(caught.value.error.message)
    for text in texts:
        assert "\n" not in text
        assert_each_cause_once(text)
    assert texts[0] == f"failed to read referenced session: {MISSING} (SESSION_REFERENCE_READ_FAILED)"


async def test_the_terminal_uis_notice_keeps_the_reference_chain(make_host: HostFactory, tmp_path: Path) -> None:
    host: Host = make_host(["session-reference"])
    agent = await host.open_agent(cwd=tmp_path)
    try:
        with pytest.raises(ComposeError) as caught:
            await agent.compose(f"see {format_mention('nope')}")
    finally:
        await agent.close()
    assert str(caught.value) == f"Session reference failed: failed to read referenced session: {MISSING}: {MISSING}"
