"""The built-in `fs-read` plugin: read-only file tools confined to the session's directory.

`read_file` reads lines of a text file and `list_dir` lists a directory. Paths are relative to
the session's cwd (absolute paths are accepted when they lie inside it); symlinks are resolved
before the check, so a link cannot lead outside. Every problem, including a path outside the
directory, is an error result the model can read, never an exception. File I/O runs in a worker
thread so a slow disk does not stall the event loop.
"""

from __future__ import annotations

import codecs
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from dsh_host.hookspecs import hookimpl

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json
    from dsh_host.tools.base import Tool, ToolContext, ToolResult

MAX_READ_BYTES = 256 * 1024
"""At most this many bytes of file text are returned by one `read_file` call."""
DEFAULT_LINE_LIMIT = 2000
MAX_DIR_ENTRIES = 1000
_BINARY_PROBE_BYTES = 8192
_SKIP_CHUNK_BYTES = 65536


class _ToolInputError(Exception):
    """A problem the model caused and can fix; reported as an error result with `code`."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _confined(cwd: Path, raw: str) -> Path:
    """`raw` resolved inside `cwd`; _ToolInputError otherwise."""
    root = cwd.resolve()
    try:
        target = (root / raw).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, NUL bytes
        raise _ToolInputError(f"cannot resolve {raw}: {exc}", "INVALID_PATH") from None
    if target != root and root not in target.parents:
        raise _ToolInputError(f"{raw} is outside the working directory {root}", "PATH_OUTSIDE_CWD")
    if not target.exists():
        raise _ToolInputError(f"{raw} does not exist", "NOT_FOUND")
    return target


def _path_argument(arguments: Json, default: str | None = None) -> str:
    value = arguments.get("path", default)
    if not isinstance(value, str) or not value:
        raise _ToolInputError("path must be a non-empty string", "INVALID_ARGUMENTS")
    return value


def _positive_int(arguments: Json, key: str, default: int) -> int:
    value = arguments.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _ToolInputError(f"{key} must be a positive integer, got {value!r}", "INVALID_ARGUMENTS")
    return value


def _skip_line(file: BinaryIO) -> bool:
    """Move past one line, however long, without holding it; False at the end of the file."""
    started = False
    while chunk := file.readline(_SKIP_CHUNK_BYTES):
        if chunk.endswith(b"\n"):
            return True
        started = True
    return started


def _read_lines(cwd: Path, raw: str, offset: int, limit: int) -> str:
    """Lines `offset`.. (1-based) of a text file: at most `limit` lines and MAX_READ_BYTES bytes."""
    path = _confined(cwd, raw)
    if not path.is_file():
        raise _ToolInputError(f"{raw} is not a regular file", "NOT_A_FILE")
    with path.open("rb") as file:
        if b"\0" in file.read(_BINARY_PROBE_BYTES):
            raise _ToolInputError(f"{raw} is a binary file", "BINARY_FILE")
        file.seek(0)
        for _ in range(offset - 1):
            if not _skip_line(file):
                break
        text = bytearray()
        line = offset  # the line being read
        while line < offset + limit and len(text) < MAX_READ_BYTES:
            chunk = file.readline(MAX_READ_BYTES - len(text))
            if not chunk:
                break
            text += chunk
            line += chunk.endswith(b"\n")
        more = bool(file.read(1))
    if not text:
        return f"[offset {offset} is past the end of the file]" if offset > 1 else "[empty file]"
    # A cut inside a multi-byte character drops its head instead of inventing a replacement.
    decoded = codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(text), final=not more)
    if not more:
        return decoded
    if line == offset + limit:
        notice = f"[more lines follow; continue with offset {line}]"
    elif text.endswith(b"\n"):
        notice = f"[output capped at {MAX_READ_BYTES} bytes; continue with offset {line}]"
    else:
        notice = f"[output capped at {MAX_READ_BYTES} bytes inside line {line}; continue with offset {line + 1}]"
    return decoded + ("" if decoded.endswith("\n") else "\n") + notice


def _list(cwd: Path, raw: str) -> str:
    path = _confined(cwd, raw)
    if not path.is_dir():
        raise _ToolInputError(f"{raw} is not a directory", "NOT_A_DIRECTORY")
    with os.scandir(path) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    # is_dir() follows links: the model sees what it would find when reading the entry.
    lines = [entry.name + ("/" if entry.is_dir() else "") for entry in entries[:MAX_DIR_ENTRIES]]
    if len(entries) > MAX_DIR_ENTRIES:
        lines.append(f"[{len(entries) - MAX_DIR_ENTRIES} more entries not shown]")
    return "\n".join(lines) if lines else "[empty directory]"


async def _run(work: Callable[..., str], *args: object) -> ToolResult:
    # Imported here (asyncio is loaded by the event loop running the tool): every dsh command
    # mounts this plugin, few run a tool.
    import asyncio

    from dsh_host.tools.base import ToolResult

    try:
        return ToolResult.text(await asyncio.to_thread(work, *args))
    except _ToolInputError as exc:
        return ToolResult.text(str(exc), is_error=True, code=exc.code)
    except OSError as exc:
        return ToolResult.text(f"cannot read {args[1]}: {exc.strerror or exc}", is_error=True, code="READ_FAILED")


async def read_file(arguments: Json, context: ToolContext) -> ToolResult:
    """Run `read_file`: the requested lines of a text file inside the session's directory."""
    from dsh_host.tools.base import ToolResult

    try:
        raw = _path_argument(arguments)
        offset = _positive_int(arguments, "offset", 1)
        limit = _positive_int(arguments, "limit", DEFAULT_LINE_LIMIT)
    except _ToolInputError as exc:
        return ToolResult.text(str(exc), is_error=True, code=exc.code)
    return await _run(_read_lines, context.cwd, raw, offset, limit)


async def list_dir(arguments: Json, context: ToolContext) -> ToolResult:
    """Run `list_dir`: the names in a directory inside the session's directory, dirs with `/`."""
    from dsh_host.tools.base import ToolResult

    try:
        raw = _path_argument(arguments, ".")
    except _ToolInputError as exc:
        return ToolResult.text(str(exc), is_error=True, code=exc.code)
    return await _run(_list, context.cwd, raw)


@functools.cache
def _tools() -> tuple[Tool, Tool]:
    # Made on first use: every dsh command mounts this plugin, few build an agent.
    from dsh_host.tools.base import Tool

    return (
        Tool(
            name="read_file",
            description=(
                "Read a UTF-8 text file in the working directory. Returns up to `limit` lines starting at "
                f"line `offset` (1-based), at most {MAX_READ_BYTES} bytes; a notice says how to continue."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the working directory."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read (default 1)."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Maximum number of lines (default {DEFAULT_LINE_LIMIT}).",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            run=read_file,
        ),
        Tool(
            name="list_dir",
            description="List a directory in the working directory: one name per line, directories end with '/'.",
            parameters={
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Directory path, relative to the working directory (default '.').",
                    },
                },
                "additionalProperties": False,
            },
            run=list_dir,
        ),
    )


@hookimpl
def dsh_register_tools(register: Callable[[Tool], None]) -> None:
    """Register `read_file` and `list_dir` for the agent being built."""
    for tool in _tools():
        register(tool)
