"""The keyless, deterministic model: canned replies, script files, and compaction summaries.

Without a script it answers every request from the request alone (no randomness, no clock):
an echo of the user's request, an acknowledgement of referenced sessions, or a structured
checkpoint for compaction requests. With a script (a list of entries, or a JSON or TOML file)
it plays the entries in order, one per request, which is what tests use.

The chunk-list builders reproduce the reference test fixture's helpers exactly, so logs written
with them match the reference's golden logs.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_host.errors import ConfigError
from dsh_host.models.base import JsonDict, ModelFailure, ModelRequest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    from dsh_host.models.registry import ModelHost

ScriptEntry = list[JsonDict] | Callable[[ModelRequest], Any] | str
"""A chunk list, a function of the request returning one (or an awaitable of one), or "hang"."""

HANG = "hang"
DEFAULT_CONTEXT_WINDOW = 128000
REQUEST_DELIMITER = "\n\n## My request:\n"
COMPACTION_MARKER = "acting as a compaction engine"

_QUOTE_LIMIT = 80
_QUOTE_FLOOR = 40  # below this a quote stops being recognisable; tiny inputs need no shrinking
_REPLY_LIMIT = 200
_REFERENCED = re.compile(r"<referenced-sessions>\n?(.*?)\n?</referenced-sessions>", re.DOTALL)
_PRIOR_PRIMARY = re.compile(r"## Primary Request and Intent\n- (.+)")


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


def tool_call_response(call_id: str, name: str, args: Any, text: str = "") -> list[JsonDict]:
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
    exhausted.
    """

    def __init__(self, script: Sequence[ScriptEntry] | None = None, *, context_window: int | None = None) -> None:
        self.requests: list[ModelRequest] = []
        self._script: deque[ScriptEntry] | None = deque(script) if script is not None else None
        self._context_window = context_window if context_window is not None else DEFAULT_CONTEXT_WINDOW

    def context_window(self, model: str) -> int | None:
        return self._context_window

    async def stream(self, request: ModelRequest) -> AsyncIterator[JsonDict]:
        """Yield the next script entry's chunks (or the plain-mode reply) for `request`."""
        self.requests.append(request)
        if self._script is None:
            entry: ScriptEntry = plain_reply(request)
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
        for chunk in chunks:
            # A real stream arrives over time; yielding to the loop lets a cancel land mid-stream.
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
    return ScriptedAdapter(script, context_window=context_window)


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
            data: Any = tomllib.loads(text)
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


def _entry(path: Path, index: int, entry: Any) -> ScriptEntry:
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


def plain_reply(request: ModelRequest) -> list[JsonDict]:
    """The chunks the scripted model answers `request` with when it has no script."""
    if request.purpose == "compaction" or _is_compaction(request.messages):
        return text_response(compaction_summary(request.messages))
    pending = _since_last_answer(request.messages)
    # Separate contexts may follow the prompt that carries the referenced sessions.
    referencing = next((t for t in map(_text_of, pending) if "<referenced-sessions>" in t), None)
    if referencing is not None:
        return text_response(_referenced_reply(referencing))
    last = pending[-1] if pending else {}
    text = _text_of(last)
    if text.strip():
        return text_response(f"Scripted reply: {_shorten(text, _REPLY_LIMIT)}")
    results = sum(1 for b in last.get("content", ()) if b.get("type") == "tool-result")
    if results:
        return text_response(f"Scripted reply: received {results} tool result{'s' * (results != 1)}.")
    return text_response("Scripted reply: (no request text)")


def compaction_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    """A structured checkpoint of `messages` under the compaction instruction's headings.

    It quotes the first and the latest user requests, names the latest tool calls, and counts
    what it condensed. Quotes shrink with the input, so the checkpoint of an input of more than
    a few hundred characters is clearly shorter than that input.
    """
    condensed = list(messages)
    if _is_compaction(condensed):
        condensed.pop()  # the instruction itself is not part of the conversation
    digest = _Digest.of(condensed)
    # The original request comes from an earlier checkpoint when there is one, else it is the
    # first request here; the latest few of the others follow it.
    first = [] if digest.prior_request else digest.requests[:1]
    later = digest.requests[len(first) :][-3:]
    items = len(first) + len(later) + len(digest.calls[-3:])
    limit = max(_QUOTE_FLOOR, min(_QUOTE_LIMIT, digest.chars // (4 * max(items, 1))))

    def quote(text: str) -> str:
        return json.dumps(_shorten(text, limit), ensure_ascii=False)

    primary = digest.prior_request or (quote(first[0]) if first else "(none)")
    sections = {
        "Primary Request and Intent": [primary],
        "Key Technical Concepts": [
            f"{len(condensed)} messages: {len(digest.requests)} requests, {len(digest.calls)} tool calls"
        ],
        "Files and Code": [_shorten(call, limit) for call in digest.calls[-3:]],
        "Errors and Fixes": [f"{digest.errors} tool calls failed"] if digest.errors else [],
        "Pending Tasks": [],
        "Current Work": [quote(text) for text in later[-1:]],
        "Next Step": [],
        "Critical Context": [f"earlier request: {quote(text)}" for text in later[:-1]],
    }
    return "\n\n".join(
        f"## {heading}\n" + "\n".join(f"- {bullet}" for bullet in (bullets or ["(none)"]))
        for heading, bullets in sections.items()
    )


@dataclass(frozen=True)
class _Digest:
    """What a checkpoint keeps of the condensed messages."""

    requests: list[str]  # user texts, oldest first
    prior_request: str | None  # the primary request of an earlier checkpoint among them
    calls: list[str]  # "name arguments" of each tool call
    errors: int  # tool results flagged as errors
    chars: int  # the size of the condensed text

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]]) -> _Digest:
        requests: list[str] = []
        prior: str | None = None
        calls: list[str] = []
        errors = chars = 0
        for message in messages:
            for block in message.get("content", ()):
                chars += _block_chars(block)
                if block.get("type") == "tool-call":
                    calls.append(f"{block.get('name', '')} {block.get('arguments', '')}")
                elif block.get("type") == "tool-result":
                    errors += bool(block.get("isError"))
            text = _text_of(message) if message.get("role") == "user" else ""
            if "<compacted-summary>" in text:
                # An earlier checkpoint: carry its original request forward, do not quote it.
                match = _PRIOR_PRIMARY.search(text)
                if match and not requests and prior is None:
                    prior = match.group(1)
            elif text.strip():
                requests.append(text)
        return cls(requests, prior, calls, errors, chars)


def _block_chars(block: Mapping[str, Any]) -> int:
    if block.get("type") == "tool-result":
        return sum(_block_chars(inner) for inner in block.get("content", ()))
    return sum(len(block.get(key) or "") for key in ("text", "name", "arguments"))


def _referenced_reply(text: str) -> str:
    match = _REFERENCED.search(text)
    try:
        snapshot = json.loads(match.group(1)) if match else None
    except ValueError:
        snapshot = None
    after = text[match.end() :] if match else text
    request = after.split(REQUEST_DELIMITER, 1)[1] if REQUEST_DELIMITER in after else ""
    answer = f"Scripted reply: {_shorten(request, _REPLY_LIMIT)}" if request.strip() else "Scripted reply: (no request)"
    if not isinstance(snapshot, list):
        return f"I could not read the referenced-session snapshot. {answer}"
    labels = [
        str(item.get("label") or item.get("sessionId") or "?") if isinstance(item, dict) else "?" for item in snapshot
    ]
    count = len(labels)
    names = ", ".join(json.dumps(label, ensure_ascii=False) for label in labels)
    what = f"{count} session{'s' * (count != 1)}: {names}" if count else "no sessions"
    return f"I read the referenced-session snapshot ({what}) as background. {answer}"


def _is_compaction(messages: Sequence[Mapping[str, Any]]) -> bool:
    return bool(messages) and COMPACTION_MARKER in _text_of(messages[-1])


def _since_last_answer(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The user messages after the last assistant message: what this reply answers."""
    pending: list[Mapping[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "user":
            pending.insert(0, message)
    return pending


def _text_of(message: Mapping[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message.get("content", ()) if b.get("type") == "text")


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
