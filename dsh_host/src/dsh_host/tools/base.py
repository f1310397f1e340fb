"""The tool record tools are registered with (`dsh_register_tools`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_host.jsontypes import Json, JsonValue  # imported at run time for typing.get_type_hints

if TYPE_CHECKING:
    import asyncio


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know: the session's cwd and id, and the turn's cancel signal."""

    cwd: Path
    session_id: str
    signal: asyncio.Event  # set when the turn is cancelled


@dataclass(frozen=True)
class ToolResult:
    """A tool's outcome. `content` is a list of content blocks; `is_error` marks failures."""

    content: Sequence[Json]
    is_error: bool = False
    error: Mapping[str, str] | None = None  # {"name", "code"} for error results
    additional_contexts: Sequence[Json] = ()

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, code: str | None = None) -> ToolResult:
        error = {"name": "ToolError", "code": code} if is_error and code else None
        return cls(content=[{"type": "text", "text": text}], is_error=is_error, error=error)


@dataclass(frozen=True)
class Tool:
    """A tool: its model-facing schema and the async function that runs it.

    `run(arguments, context)` receives the parsed JSON arguments. Raising is allowed (the
    agent turns the exception into an error result); returning an error `ToolResult` is better.
    """

    name: str
    description: str
    parameters: Json
    run: Callable[[dict[str, JsonValue], ToolContext], Awaitable[ToolResult]]

    def schema(self) -> dict[str, JsonValue]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}
