"""The model adapter protocol and the request it receives.

Messages, content blocks and stream chunks are plain JSON dicts in the log's vocabulary
(docs/log-format.md; camelCase keys), exactly as they are logged:

- content blocks: `{"type": "text", "text"}`, `{"type": "reasoning", "text"}`,
  `{"type": "tool-call", "id", "name", "arguments"}`,
  `{"type": "tool-result", "toolCallId", "content", "isError"}`;
- messages: `{"role": "user" | "assistant", "content": [...], "provenance"?}`;
- stream chunks: `block-start {index, blockType}`, `text-delta {index, text}`,
  `reasoning-delta {index, text}`, `tool-call-delta {index, id, name?, argumentsDelta}`,
  `block-end {index, block}`, `usage {usage}`, `finish {reason, replayState?}` where `reason` is
  `{"kind": "stop" | "tool-calls" | "max-tokens"}` or `{"kind": "error" | "aborted", "failure"}`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

from dsh_host.errors import DshError
from dsh_host.jsontypes import Json, JsonValue  # imported at run time for typing.get_type_hints

if TYPE_CHECKING:
    import asyncio

JsonDict: TypeAlias = dict[str, JsonValue]


@dataclass(frozen=True)
class ToolSchema:
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: Json

    def to_json(self) -> JsonDict:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class ModelRequest:
    """One model call. Everything in it but `signal` and `purpose` is derived from the log."""

    provider: str
    model: str
    messages: Sequence[Json]
    system: str | None = None
    tools: Sequence[Json] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: Sequence[str] | None = None
    session_id: str | None = None
    purpose: str | None = None  # "compaction" for auxiliary calls, None for loop steps
    signal: asyncio.Event | None = field(default=None, compare=False)


class ModelFailure(DshError):
    """A failed model call, normalised: `code` is stable (`RATE_LIMIT`, `SERVER_ERROR`, ...)."""

    def __init__(
        self,
        message: str,
        code: str,
        *,
        status: int | None = None,
        retry_after_ms: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.message = message
        self.status = status
        self.retry_after_ms = retry_after_ms
        self.request_id = request_id

    @classmethod
    def aborted(cls) -> ModelFailure:
        """The failure an adapter raises when `request.signal` stops a call."""
        return cls("aborted", "ABORTED")

    def __repr__(self) -> str:
        return f"ModelFailure({self.message!r}, {self.code!r}, status={self.status!r})"

    def to_json(self) -> JsonDict:
        """The `LlmFailure` shape logged in `turn/end` reasons."""
        out: JsonDict = {"message": self.message, "code": self.code}
        if self.status is not None:
            out["status"] = self.status
        if self.retry_after_ms is not None:
            out["providerRetryAfterMs"] = self.retry_after_ms
        if self.request_id is not None:
            out["requestId"] = self.request_id
        return out


class ModelAdapter(Protocol):
    """What a model adapter implements. Registered through `dsh_register_models`."""

    def stream(self, request: ModelRequest) -> AsyncIterator[JsonDict]:
        """Yield stream chunks for `request`; stop promptly once `request.signal` is set.

        A failure either raises `ModelFailure` or ends with an `error`/`aborted` finish chunk.
        """
        ...

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens, if known (compaction's pressure trigger)."""
        ...
