"""The `fs-read` plugin: read-only file tools confined to the session's directory."""

from __future__ import annotations

import asyncio
import os

import pytest

from dsh_host.models.scripted import text_response, tool_call_response
from dsh_host.tools import fs_read
from dsh_host.tools.base import ToolContext
from tests.dsh_host.agent_harness import agent_harness, text


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    (root / "notes.txt").write_text("one\ntwo\nthree\nfour\n", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside\n", encoding="utf-8")
    return root


def context(root) -> ToolContext:
    return ToolContext(cwd=root, session_id="s1", signal=asyncio.Event())


async def read(root, **arguments):
    return await fs_read.read_file(arguments, context(root))


def body(result) -> str:
    [block] = result.content
    return block["text"]


async def test_read_file_returns_the_text(workspace):
    result = await read(workspace, path="notes.txt")
    assert not result.is_error
    assert body(result) == "one\ntwo\nthree\nfour\n"


async def test_read_file_pages_by_lines(workspace):
    assert body(await read(workspace, path="notes.txt", offset=2, limit=2)) == (
        "two\nthree\n[more lines follow; continue with offset 4]"
    )
    assert body(await read(workspace, path="notes.txt", offset=4)) == "four\n"
    assert body(await read(workspace, path="notes.txt", offset=9)) == "[offset 9 is past the end of the file]"


async def test_read_file_accepts_an_absolute_path_inside(workspace):
    result = await read(workspace, path=str(workspace / "src" / "main.py"))
    assert body(result) == "print('hi')\n"


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "src/../../secret.txt"])
async def test_paths_outside_are_error_results(workspace, path):
    result = await read(workspace, path=path)
    assert result.is_error
    assert result.error == {"name": "ToolError", "code": "PATH_OUTSIDE_CWD"}
    assert "outside the working directory" in body(result)


async def test_a_symlink_cannot_lead_outside(workspace, tmp_path):
    os.symlink(tmp_path / "secret.txt", workspace / "link.txt")
    os.symlink(tmp_path, workspace / "up")
    for path in ("link.txt", "up/secret.txt"):
        result = await read(workspace, path=path)
        assert result.error["code"] == "PATH_OUTSIDE_CWD"


async def test_a_symlink_inside_is_followed(workspace):
    os.symlink(workspace / "notes.txt", workspace / "alias.txt")
    assert body(await read(workspace, path="alias.txt", limit=1)).startswith("one\n")


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"path": "missing.txt"}, "NOT_FOUND"),
        ({"path": "src"}, "NOT_A_FILE"),
        ({"path": ""}, "INVALID_ARGUMENTS"),
        ({}, "INVALID_ARGUMENTS"),
        ({"path": "notes.txt", "offset": 0}, "INVALID_ARGUMENTS"),
        ({"path": "notes.txt", "limit": True}, "INVALID_ARGUMENTS"),
        ({"path": "bad\0name"}, "INVALID_PATH"),
    ],
)
async def test_bad_requests_are_error_results(workspace, arguments, code):
    result = await fs_read.read_file(arguments, context(workspace))
    assert result.is_error
    assert result.error["code"] == code


async def test_binary_files_are_refused(workspace):
    (workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    result = await read(workspace, path="image.png")
    assert result.error["code"] == "BINARY_FILE"


async def test_output_is_capped_in_bytes(workspace):
    line = "x" * 1000 + "\n"
    (workspace / "big.txt").write_text(line * 1000, encoding="utf-8")
    text_out = body(await read(workspace, path="big.txt"))
    kept, notice = text_out.rsplit("\n", 1)
    assert len(kept.encode()) == fs_read.MAX_READ_BYTES  # 261 whole lines and the head of line 262
    cap = fs_read.MAX_READ_BYTES
    assert notice == f"[output capped at {cap} bytes inside line 262; continue with offset 263]"


async def test_one_huge_line_is_cut_on_a_character_boundary(workspace):
    (workspace / "huge.txt").write_text("é" * fs_read.MAX_READ_BYTES, encoding="utf-8")
    text_out = body(await read(workspace, path="huge.txt"))
    head, notice = text_out.rsplit("\n", 1)
    assert set(head) == {"é"}
    assert len(head) == fs_read.MAX_READ_BYTES // 2
    assert notice.startswith("[output capped at")


async def test_list_dir(workspace):
    result = await fs_read.list_dir({}, context(workspace))
    assert body(result) == "notes.txt\nsrc/"
    assert body(await fs_read.list_dir({"path": "src"}, context(workspace))) == "main.py"
    assert (await fs_read.list_dir({"path": ".."}, context(workspace))).error["code"] == "PATH_OUTSIDE_CWD"
    assert (await fs_read.list_dir({"path": "notes.txt"}, context(workspace))).error["code"] == "NOT_A_DIRECTORY"


async def test_list_dir_caps_entries(workspace, monkeypatch):
    monkeypatch.setattr(fs_read, "MAX_DIR_ENTRIES", 1)
    assert body(await fs_read.list_dir({}, context(workspace))) == "notes.txt\n[1 more entries not shown]"


async def test_round_trip_through_the_agent(tmp_path):
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    script = [
        tool_call_response("call-1", "read_file", {"path": "notes.txt"}),
        tool_call_response("call-2", "read_file", {"path": "../escape"}),
        text_response("It says 42."),
    ]
    async with agent_harness(tmp_path, script, plugins="fs-read") as h:
        await h.run("what does notes.txt say?")

        assert [t["name"] for t in h.requests[0].tools] == ["read_file", "list_dir"]
        [header] = h.of("request/header")
        assert [t["name"] for t in header.data["header"]["tools"]] == ["read_file", "list_dir"]
        first, second = h.of("tool/result")
        assert first.data["content"] == [text("the answer is 42\n")]
        assert second.data["isError"] is True
        assert second.data["error"]["code"] == "PATH_OUTSIDE_CWD"
        assert h.requests[2].messages[-1]["content"][0]["isError"] is True
        assert h.turn_ends() == [{"kind": "completed"}]
