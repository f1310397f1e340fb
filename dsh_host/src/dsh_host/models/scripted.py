"""The keyless, deterministic model: canned replies and script files.

Without a script it answers every request from the request alone (no randomness, no clock):
with what a plugin's `dsh_scripted_reply` returns for it (compaction answers its summary
requests with a structured checkpoint, session-reference acknowledges referenced sessions), else
an echo of the user's request. With a script (a list of entries, or a JSON or TOML file) it
plays the entries in order, one per request, which is what tests use.

The chunk-list builders reproduce the reference test fixture's helpers exactly, so logs written
with them match the reference's golden logs.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_host.errors import ConfigError
from dsh_host.models.base import JsonDict, ModelFailure, ModelRequest
from dsh_host.models.messages import message_text, unanswered_messages
from dsh_host.text import shorten_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue
    from dsh_host.models.registry import ModelHost

ScriptEntry = list[JsonDict] | Callable[[ModelRequest], "list[JsonDict] | Awaitable[list[JsonDict]]"] | str
"""A chunk list, a function of the request returning one (or an awaitable of one), or "hang"."""

HANG = "hang"
DEFAULT_CONTEXT_WINDOW = 128000
REPLY_LIMIT = 200
"""How many characters of the request an echo reply quotes."""

PluginReply = Callable[[ModelRequest], "str | None"]
"""The reply plugins give a request in plain mode (the `dsh_scripted_reply` hook), or None."""


# --- chunk-list builders -------------------------------------------------------------------------


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _text_chunks(text: str, finish: JsonDict) -> list[JsonDict]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": char} for char in text),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": _utf16_length(text)}},
        {"type": "finish", "reason": finish},
    ]


def text_response(text: str) -> list[JsonDict]:
    """A text reply streamed one code point per delta, finishing with `stop`."""
    return _text_chunks(text, {"kind": "stop"})


def max_tokens_response(text: str) -> list[JsonDict]:
    """Like `text_response`, but the reply was cut off at the token cap."""
    return _text_chunks(text, {"kind": "max-tokens"})


def tool_call_response(call_id: str, name: str, args: JsonValue, text: str = "") -> list[JsonDict]:
    """One tool call (arguments split across two deltas), after an optional text block."""
    arguments = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    chunks: list[JsonDict] = []
    index = 0
    if text:
        chunks += [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": text},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        ]
        index = 1
    chunks += [
        {"type": "block-start", "index": index, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": index,
            "id": call_id,
            "name": name,
            "argumentsDelta": arguments[:5],
        },
        {"type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": arguments[5:]},
        {
            "type": "block-end",
            "index": index,
            "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments},
        },
        {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 5}},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    return chunks


def error_finish_response(message: str, code: str) -> list[JsonDict]:
    """A stream that fails by its finish reason rather than by raising."""
    return [{"type": "finish", "reason": {"kind": "error", "failure": {"message": message, "code": code}}}]


# --- the adapter ---------------------------------------------------------------------------------


class ScriptedAdapter:
    """A model that plays a script, or answers deterministically when it has none.

    `requests` records every request in arrival order, including the one that found the script
    exhausted. `chunks_per_read` chunks arrive together, as one socket read of a real stream
    brings several server-sent events when the reader is the slower side: the stream yields to
    the event loop once per read (once per chunk by default). In plain mode
    `plugin_reply(request)` answers first (`create` wires it to the `dsh_scripted_reply` hook);
    None leaves the request to the echo.
    """

    def __init__(
        self,
        script: Sequence[ScriptEntry] | None = None,
        *,
        context_window: int | None = None,
        plugin_reply: PluginReply = lambda request: None,
        chunks_per_read: int = 1,
    ) -> None:
        if chunks_per_read < 1:
            raise ValueError(f"chunks_per_read must be at least 1, got {chunks_per_read!r}")
        self.requests: list[ModelRequest] = []
        self._chunks_per_read = chunks_per_read
        self._plugin_reply = plugin_reply
        self._script: deque[ScriptEntry] | None = deque(script) if script is not None else None
        self._context_window = context_window if context_window is not None else DEFAULT_CONTEXT_WINDOW

    def context_window(self, model: str) -> int | None:
        return self._context_window

    async def stream(self, request: ModelRequest) -> AsyncIterator[JsonDict]:
        """Yield the next script entry's chunks (or the plain-mode reply) for `request`."""
        self.requests.append(request)
        if self._script is None:
            entry: ScriptEntry = plain_reply(request, self._plugin_reply)
        elif self._script:
            entry = self._script.popleft()
        else:
            raise ModelFailure("MockAdapter: script exhausted", "SCRIPT_EXHAUSTED")
        signal = request.signal
        if isinstance(entry, str):
            if entry != HANG:
                raise ModelFailure(f"unknown script entry {entry!r}", "BAD_SCRIPT")
            yield {"type": "block-start", "index": 0, "blockType": "text"}
            yield {"type": "text-delta", "index": 0, "text": "partial"}
            await (signal or asyncio.Event()).wait()
            raise ModelFailure.aborted()
        chunks = entry(request) if callable(entry) else entry
        if inspect.isawaitable(chunks):
            chunks = await chunks
        for index, chunk in enumerate(chunks):
            # A real stream arrives over time, a socket read at a time; yielding to the loop at
            # each read lets a cancel land mid-stream.
            if index % self._chunks_per_read == 0:
                await asyncio.sleep(0)
            if signal is not None and signal.is_set():
                raise ModelFailure.aborted()
            yield chunk


def create(host: ModelHost, env: Mapping[str, str] | None = None) -> ScriptedAdapter:
    """The adapter `[models.scripted]` configures: its `script`, else `$DSH_SCRIPT`, else plain."""
    env = os.environ if env is None else env
    table = host.config.model_table("scripted")
    context_window = table.get("context_window")
    if context_window is not None and context_window <= 0:
        raise ConfigError(f"[models.scripted] context_window must be positive, got {context_window!r}")
    script_path: Path | None = None
    if table.get("script"):
        script_path = Path(table["script"]).expanduser()
        # A relative path in a config file means relative to that file, not to the cwd.
        if not script_path.is_absolute() and host.config.path is not None:
            script_path = host.config.path.parent / script_path
    elif env.get("DSH_SCRIPT"):
        script_path = Path(env["DSH_SCRIPT"]).expanduser()
    script = load_script(script_path) if script_path is not None else None
    return ScriptedAdapter(
        script,
        context_window=context_window,
        plugin_reply=lambda request: host.hook.dsh_scripted_reply(request=request),
    )


# --- script files --------------------------------------------------------------------------------


def load_script(path: str | os.PathLike[str]) -> list[ScriptEntry]:
    """Read a script file: JSON (a list, or `{"script": [...]}`) or TOML (`[[script]]` tables).

    Entries: `{"text"}`, `{"max_tokens"}`, `{"tool_call": {"id", "name", "arguments"}, "text"?}`,
    `{"hang": true}`, `{"error": {"message", "code"}}` (the call raises),
    `{"finish_error": {"message", "code"}}` (the stream ends with an error finish) and
    `{"chunks": [...]}`. A bad file is a ConfigError naming the file and the entry's index.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"script {path}: cannot read it ({exc})") from None
    if path.suffix.lower() == ".toml":
        try:
            data: JsonValue = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"script {path}: invalid TOML: {exc}") from None
    elif path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"script {path}: invalid JSON: {exc}") from None
    else:
        raise ConfigError(f"script {path}: unknown format (use a .json or .toml file)")
    entries = data.get("script") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ConfigError(f"script {path}: expected a list of entries (a JSON array, or a `script` array)")
    return [_entry(path, index, entry) for index, entry in enumerate(entries)]


_ENTRY_KINDS = ("text", "max_tokens", "tool_call", "hang", "error", "finish_error", "chunks")


def _entry(path: Path, index: int, entry: JsonValue) -> ScriptEntry:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"script {path}: entry {index}: {why}")

    if not isinstance(entry, dict):
        raise bad(f"expected a table, got {entry!r}")
    kinds = [key for key in _ENTRY_KINDS if key in entry]
    # "text" also rides along with "tool_call" as the text before the call.
    if "tool_call" in kinds and "text" in kinds:
        kinds.remove("text")
    unknown = sorted(set(entry) - set(_ENTRY_KINDS))
    if unknown:
        raise bad(f"unknown key {unknown[0]!r} (known: {', '.join(_ENTRY_KINDS)})")
    if len(kinds) != 1:
        raise bad(f"expected exactly one of {', '.join(_ENTRY_KINDS)}, got {kinds or 'none'}")
    kind, value = kinds[0], entry[kinds[0]]
    if kind in ("text", "max_tokens"):
        if not isinstance(value, str):
            raise bad(f"{kind} must be a string, got {value!r}")
        return text_response(value) if kind == "text" else max_tokens_response(value)
    if kind == "tool_call":
        text = entry.get("text", "")
        if not isinstance(value, dict) or not isinstance(text, str):
            raise bad("tool_call must be a table with id, name and arguments, and text a string")
        call_id, name, arguments = value.get("id"), value.get("name"), value.get("arguments", {})
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise bad(f"tool_call needs a non-empty string id and name, got {value!r}")
        if not isinstance(arguments, dict):
            raise bad(f"tool_call arguments must be a table, got {arguments!r}")
        return tool_call_response(call_id, name, arguments, text)
    if kind == "hang":
        if value is not True:
            raise bad(f"hang must be true, got {value!r}")
        return HANG
    if kind in ("error", "finish_error"):
        if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in ("message", "code")):
            raise bad(f"{kind} must be a table with string message and code, got {value!r}")
        if kind == "finish_error":
            return error_finish_response(value["message"], value["code"])
        return _raiser(value["message"], value["code"])
    if not isinstance(value, list) or not all(isinstance(c, dict) and isinstance(c.get("type"), str) for c in value):
        raise bad("chunks must be a list of tables, each with a string type")
    return value


def _raiser(message: str, code: str) -> Callable[[ModelRequest], list[JsonDict]]:
    def fail(request: ModelRequest) -> list[JsonDict]:
        raise ModelFailure(message, code)

    return fail


# --- plain mode: deterministic replies -----------------------------------------------------------


def plain_reply(request: ModelRequest, plugin_reply: PluginReply = lambda request: None) -> list[JsonDict]:
    """The chunks the scripted model answers `request` with when it has no script."""
    answer = plugin_reply(request)
    if answer is not None:
        return text_response(answer)
    pending = unanswered_messages(request.messages)
    last = pending[-1] if pending else {}
    text = message_text(last)
    if text.strip():
        return text_response(f"Scripted reply: {shorten_text(text, REPLY_LIMIT)}")
    results = sum(1 for b in last.get("content", ()) if b.get("type") == "tool-result")
    if results:
        return text_response(f"Scripted reply: received {results} tool result{'s' * (results != 1)}.")
    return text_response("Scripted reply: (no request text)")
