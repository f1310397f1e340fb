"""An OpenAI-compatible Chat Completions streaming adapter (DeepSeek's API by default).

One call is one `POST {base_url}/chat/completions` with `stream: true`. The request maps our
message vocabulary onto OpenAI's; the server-sent events map back onto stream chunks: reasoning
content, text and each tool call become blocks, closed when the stream completes, followed by
the usage and the finish reason. Rate limits, server errors and network errors are retried with
backoff, but only before the first chunk: a retry after output was yielded would duplicate it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError

from dsh_host.errors import ConfigError
from dsh_host.models.base import JsonDict, ModelFailure, ModelRequest, ToolSchema

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.jsontypes import Json, JsonValue
    from dsh_host.models.registry import ModelHost

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_API_KEY_ENV = "DEEPSEEK_API_KEY"
KNOWN_CONTEXT_WINDOWS = {"deepseek-chat": 128000, "deepseek-reasoner": 128000}

DONE = "[DONE]"
"""The data OpenAI-compatible servers send as their last event."""

_RETRYABLE = frozenset({"RATE_LIMIT", "SERVER_ERROR", "NETWORK"})
_CONTEXT_OVERFLOW = re.compile(r"context[ _-]?(length|window)|maximum context", re.IGNORECASE)
_DETAIL_LIMIT = 500

T = TypeVar("T")


# --- request -------------------------------------------------------------------------------------


def build_payload(request: ModelRequest) -> JsonDict:
    """The JSON body of the Chat Completions request for `request`."""
    payload: JsonDict = {
        "model": request.model,
        "messages": to_openai_messages(request.messages, request.system),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        payload["tools"] = [_tool(tool) for tool in request.tools]
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    if request.max_tokens is not None:
        payload["max_tokens"] = request.max_tokens
    if request.stop:
        payload["stop"] = list(request.stop)
    return payload


def to_openai_messages(messages: Sequence[Json], system: str | None = None) -> list[JsonDict]:
    """Our messages as OpenAI chat messages, the system prompt first."""
    out: list[JsonDict] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        blocks = message.get("content") or ()
        role = message.get("role")
        if role == "assistant":
            assistant = _assistant_message(blocks)
            if assistant is not None:
                out.append(assistant)
        elif role == "system":
            out.append({"role": "system", "content": _joined_text(blocks)})
        else:
            out.extend(_user_messages(blocks))
    return out


def _joined_text(blocks: Sequence[Json]) -> str:
    # Joined with nothing in between: a prompt-prefix message is several blocks that read as one
    # text (the baked contexts + the prompt delimiter + the request).
    return "".join(block["text"] for block in blocks if block.get("type") == "text")


def _user_messages(blocks: Sequence[Json]) -> list[JsonDict]:
    # Tool results go first: OpenAI requires them right after the assistant message that called
    # the tools, so any text of the same message must follow them.
    out: list[JsonDict] = [
        {
            "role": "tool",
            "tool_call_id": block["toolCallId"],
            "content": _joined_text(block.get("content") or ()),
        }
        for block in blocks
        if block.get("type") == "tool-result"
    ]
    if any(block.get("type") == "text" for block in blocks):
        out.append({"role": "user", "content": _joined_text(blocks)})
    return out


def _assistant_message(blocks: Sequence[Json]) -> JsonDict | None:
    # Reasoning blocks are dropped: DeepSeek rejects `reasoning_content` in input messages.
    calls = [
        {
            "id": block["id"],
            "type": "function",
            "function": {"name": block["name"], "arguments": block["arguments"]},
        }
        for block in blocks
        if block.get("type") == "tool-call"
    ]
    text = _joined_text(blocks)
    if not calls and not any(block.get("type") == "text" for block in blocks):
        return None
    message: JsonDict = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool(tool: Json | ToolSchema) -> JsonDict:
    schema = tool.to_json() if isinstance(tool, ToolSchema) else tool
    return {
        "type": "function",
        "function": {
            "name": schema["name"],
            "description": schema.get("description", ""),
            "parameters": _plain(schema.get("parameters", {"type": "object", "properties": {}})),
        },
    }


def _plain(value: JsonValue) -> JsonValue:
    """A JSON-serialisable copy of a value that may hold read-only mappings or tuples."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


# --- response stream ---------------------------------------------------------------------------


def map_usage(raw: Json) -> JsonDict:
    """OpenAI/DeepSeek usage as our `TokenUsage`, with disjoint counts.

    Cached prompt tokens are reported apart from the uncached ones, and reasoning tokens apart
    from the visible output, so that summing the fields never counts a token twice.
    """
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    cached = raw.get("prompt_cache_hit_tokens")
    if cached is None:
        cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    cached = int(cached or 0)
    reasoning = int((raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    usage: JsonDict = {
        "inputTokens": max(0, prompt - cached),
        "outputTokens": max(0, completion - reasoning),
    }
    if cached > 0:
        usage["cacheReadTokens"] = cached
    if reasoning > 0:
        usage["reasoningTokens"] = reasoning
    return usage


def map_finish_reason(reason: str | None, *, has_tool_calls: bool) -> JsonDict:
    """An OpenAI `finish_reason` as our finish reason."""
    # Some compatible servers say "stop" for a message that ends in tool calls.
    if reason in ("tool_calls", "function_call") or (has_tool_calls and reason in (None, "stop")):
        return {"kind": "tool-calls"}
    if reason in (None, "stop"):
        return {"kind": "stop"}
    if reason == "length":
        return {"kind": "max-tokens"}
    if reason == "content_filter":
        failure = {"message": "the provider's content filter stopped the response", "code": "CONTENT_FILTER"}
    elif reason == "insufficient_system_resource":
        failure = {"message": "the provider ran out of system resources", "code": "SERVER_ERROR"}
    else:
        failure = {"message": f"the provider finished with reason {reason!r}", "code": "UNKNOWN_FINISH"}
    return {"kind": "error", "failure": failure}


@dataclass
class _OpenBlock:
    index: int
    block_type: str
    parts: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""

    def block(self) -> JsonDict:
        if self.block_type == "tool-call":
            return {
                "type": "tool-call",
                "id": self.call_id,
                "name": self.name,
                "arguments": "".join(self.parts),
            }
        return {"type": self.block_type, "text": "".join(self.parts)}


class StreamMapper:
    """Maps the JSON events of one completion stream onto stream chunks.

    Blocks stay open until `close`, so a reasoning block, a text block and each tool call are
    one block each however their deltas interleave.
    """

    def __init__(self) -> None:
        self._blocks: dict[object, _OpenBlock] = {}
        self._usage: JsonDict | None = None
        self.finish_reason: str | None = None

    def feed(self, event: Json) -> list[JsonDict]:
        """The chunks one event of the stream produces."""
        out: list[JsonDict] = []
        if event.get("usage"):
            self._usage = map_usage(event["usage"])
        for choice in event.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # one completion is requested; others would be a server quirk
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                out += self._text("reasoning", "reasoning-delta", delta["reasoning_content"])
            if delta.get("content"):
                out += self._text("text", "text-delta", delta["content"])
            for call in delta.get("tool_calls") or ():
                out += self._tool_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def close(self) -> list[JsonDict]:
        """The closing chunks: a `block-end` per block in index order, the usage, the finish."""
        out: list[JsonDict] = [
            {"type": "block-end", "index": block.index, "block": block.block()} for block in self._blocks.values()
        ]
        if self._usage is not None:
            out.append({"type": "usage", "usage": self._usage})
        has_calls = any(block.block_type == "tool-call" for block in self._blocks.values())
        out.append({"type": "finish", "reason": map_finish_reason(self.finish_reason, has_tool_calls=has_calls)})
        return out

    def _open(self, key: object, block_type: str, out: list[JsonDict]) -> _OpenBlock:
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = _OpenBlock(len(self._blocks), block_type)
            out.append({"type": "block-start", "index": block.index, "blockType": block_type})
        return block

    def _text(self, block_type: str, delta_type: str, text: str) -> list[JsonDict]:
        out: list[JsonDict] = []
        block = self._open(block_type, block_type, out)
        block.parts.append(text)
        out.append({"type": delta_type, "index": block.index, "text": text})
        return out

    def _tool_call(self, call: Json) -> list[JsonDict]:
        out: list[JsonDict] = []
        block = self._open(("tool", call.get("index", 0)), "tool-call", out)
        function = call.get("function") or {}
        if call.get("id"):
            block.call_id = call["id"]
        if not block.call_id:
            block.call_id = f"call-{block.index}"
        arguments = function.get("arguments") or ""
        block.parts.append(arguments)
        chunk: JsonDict = {"type": "tool-call-delta", "index": block.index, "id": block.call_id}
        if function.get("name"):
            block.name = function["name"]
            chunk["name"] = function["name"]
        chunk["argumentsDelta"] = arguments
        out.append(chunk)
        return out


# --- errors ------------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a server asked for, in milliseconds: `retry-after-ms`, else `Retry-After`.

    `Retry-After` is either seconds or an HTTP date; None when absent or unreadable.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms))
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw) * 1000)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now if now is not None else datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds() * 1000)


def failure_from_response(status: int, headers: Mapping[str, str], body: bytes) -> ModelFailure:
    """The failure an unsuccessful HTTP response stands for."""
    detail = _error_detail(body)
    if status in (401, 403):
        code = "AUTH"
    elif status == 429:
        code = "RATE_LIMIT"
    elif status >= 500:
        code = "SERVER_ERROR"
    elif status in (400, 413) and _CONTEXT_OVERFLOW.search(detail or body.decode("utf-8", "replace")):
        code = "CONTEXT_WINDOW_EXCEEDED"
    elif 400 <= status < 500:
        code = "BAD_REQUEST"
    else:
        code = "BAD_RESPONSE"
    return ModelFailure(
        f"HTTP {status}: {detail}" if detail else f"HTTP {status}",
        code,
        status=status,
        retry_after_ms=parse_retry_after(headers),
        request_id=headers.get("x-request-id"),
    )


def _error_detail(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:_DETAIL_LIMIT]
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:_DETAIL_LIMIT]
        if isinstance(error, str):
            return error[:_DETAIL_LIMIT]
    return text[:_DETAIL_LIMIT]


# --- cancellation ------------------------------------------------------------------------------


class _Abort:
    """Races each wait of one call against the request's signal.

    One waiter on the signal serves the whole call, so a read costs one extra task, not two.
    """

    def __init__(self, signal: asyncio.Event | None) -> None:
        self._signal = signal
        self._waiter: asyncio.Future[Any] | None = None

    def check(self) -> None:
        if self._signal is not None and self._signal.is_set():
            raise ModelFailure.aborted()

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`, or cancel it and raise the ABORTED failure once the signal is set."""
        if self._signal is None:
            return await awaitable
        if self._signal.is_set():
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never started: close it so it is not reported as never awaited
            raise ModelFailure.aborted()
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self._signal.wait())
        task = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({task, self._waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done() or self._signal.is_set():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.check()
        return task.result()

    def close(self) -> None:
        if self._waiter is not None:
            self._waiter.cancel()


async def _next_event(events: AsyncIterator[ServerSentEvent]) -> ServerSentEvent | None:
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        return None


# --- the adapter -------------------------------------------------------------------------------


class OpenAIAdapter:
    """Streams Chat Completions from an OpenAI-compatible server.

    `backoff_base` and `backoff_cap` (seconds) shape the exponential backoff between retries; a
    server's `Retry-After` replaces it, unless it asks for more than `max_retry_after` seconds, in
    which case the failure is reported at once. `extra_headers(request)` gives the headers
    plugins add to a request (`create` wires it to the `dsh_model_request_headers` hook); the
    adapter's own headers win over them.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        base_url: str = DEFAULT_BASE_URL,
        max_retries: int = 3,
        timeout: float = 300.0,
        context_window: int | None = None,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        max_retry_after: float = 60.0,
        extra_headers: Callable[[ModelRequest], Mapping[str, str]] = lambda request: {},
    ) -> None:
        self.api_key = api_key
        self.api_key_env = api_key_env
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_retry_after = max_retry_after
        self._context_window = context_window
        self._extra_headers = extra_headers

    def context_window(self, model: str) -> int | None:
        """The configured window, else the known window of a DeepSeek model, else None."""
        if self._context_window is not None:
            return self._context_window
        return KNOWN_CONTEXT_WINDOWS.get(model)

    async def stream(self, request: ModelRequest) -> AsyncIterator[JsonDict]:
        """Stream the chunks of one completion; raises `ModelFailure` on failure."""
        abort = _Abort(request.signal)
        try:
            abort.check()
            if not self.api_key:
                raise ModelFailure(f"no API key in ${self.api_key_env}", "AUTH")
            timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
            async with httpx.AsyncClient(timeout=timeout) as client:
                http_request = client.build_request(
                    "POST",
                    f"{self.base_url}/chat/completions",
                    content=json.dumps(build_payload(request)).encode("ascii"),
                    headers=self._headers(request),
                )
                response = await self._send(client, http_request, abort)
                try:
                    async for chunk in self._chunks(response, abort):
                        yield chunk
                finally:
                    await response.aclose()
        finally:
            abort.close()

    def _headers(self, request: ModelRequest) -> dict[str, str]:
        return {
            **self._extra_headers(request),
            "Authorization": f"Bearer {self.api_key}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }

    async def _send(self, client: httpx.AsyncClient, request: httpx.Request, abort: _Abort) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await abort.race(client.send(request, stream=True))
            except httpx.TransportError as exc:
                failure = ModelFailure(f"network error: {_describe(exc)}", "NETWORK")
            else:
                if response.is_success:
                    return response
                try:
                    body = await abort.race(response.aread())
                except httpx.HTTPError:
                    body = b""
                finally:
                    await response.aclose()
                failure = failure_from_response(response.status_code, response.headers, body)
            delay = self._retry_delay(attempt, failure)
            if delay is None:
                raise failure
            attempt += 1
            await abort.race(asyncio.sleep(delay))

    def _retry_delay(self, attempt: int, failure: ModelFailure) -> float | None:
        """Seconds to wait before the next attempt, or None when the failure is final."""
        if failure.code not in _RETRYABLE or attempt >= self.max_retries:
            return None
        if failure.retry_after_ms is not None:
            seconds = failure.retry_after_ms / 1000
            return seconds if seconds <= self.max_retry_after else None
        backoff = min(self.backoff_cap, self.backoff_base * 2**attempt)
        # Jitter keeps clients that failed together from retrying together.
        return backoff * random.uniform(0.5, 1.0)

    async def _chunks(self, response: httpx.Response, abort: _Abort) -> AsyncIterator[JsonDict]:
        # The event stream is UTF-8 whatever the charset says, and may open with a byte order
        # mark (WHATWG `text/event-stream`); "utf-8-sig" decodes exactly that.
        response.encoding = "utf-8-sig"
        events = EventSource(response).aiter_sse()
        mapper = StreamMapper()
        done = False
        try:
            while not done:
                try:
                    event = await abort.race(_next_event(events))
                except SSEError as exc:  # a success that is not an event stream (checked first: it is an HTTPError)
                    raise ModelFailure(
                        f"the response is not an event stream: {exc}",
                        "BAD_RESPONSE",
                        status=response.status_code,
                        request_id=response.headers.get("x-request-id"),
                    ) from None
                except httpx.HTTPError as exc:
                    raise _interrupted(response, _describe(exc)) from exc
                if event is None:
                    break
                if not event.data:
                    continue  # nothing for us (the library also dispatches a lone id, event or retry field)
                if event.data == DONE:
                    done = True
                    break
                for chunk in _map_event(mapper, event.data, response):
                    abort.check()
                    yield chunk
        finally:
            await events.aclose()
        if not done and mapper.finish_reason is None:
            raise _interrupted(response, "the connection closed before the stream finished")
        for chunk in mapper.close():
            abort.check()
            yield chunk


def _map_event(mapper: StreamMapper, data: str, response: httpx.Response) -> list[JsonDict]:
    request_id = response.headers.get("x-request-id")
    try:
        event = json.loads(data)
    except ValueError:
        raise ModelFailure(
            f"invalid JSON in the event stream: {data[:200]!r}", "BAD_RESPONSE", request_id=request_id
        ) from None
    if isinstance(event, dict) and event.get("error"):
        error = event["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise ModelFailure(
            f"the provider reported an error mid-stream: {message}", "SERVER_ERROR", request_id=request_id
        )
    try:
        return mapper.feed(event)
    except (AttributeError, TypeError, ValueError):
        # A well-formed JSON value of the wrong shape (a list, a string where a dict belongs).
        raise ModelFailure(
            f"unexpected event in the stream: {data[:200]!r}", "BAD_RESPONSE", request_id=request_id
        ) from None


def _interrupted(response: httpx.Response, why: str) -> ModelFailure:
    return ModelFailure(
        f"stream interrupted: {why}",
        "STREAM_INTERRUPTED",
        status=response.status_code,
        request_id=response.headers.get("x-request-id"),
    )


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def create(host: ModelHost, env: Mapping[str, str] | None = None) -> OpenAIAdapter:
    """The adapter configured by `[models.openai]`; the key comes from `env` (os.environ)."""
    env = os.environ if env is None else env
    table = host.config.model_table("openai")
    base_url = table.get("base_url", DEFAULT_BASE_URL)
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"[models.openai] base_url must be an http(s) URL, got {base_url!r}")
    max_retries = table.get("max_retries", 3)
    if max_retries < 0:
        raise ConfigError(f"[models.openai] max_retries must be 0 or more, got {max_retries!r}")
    timeout = float(table.get("timeout", 300.0))
    if timeout <= 0:
        raise ConfigError(f"[models.openai] timeout must be positive, got {timeout!r}")
    context_window = table.get("context_window")
    if context_window is not None and context_window <= 0:
        raise ConfigError(f"[models.openai] context_window must be positive, got {context_window!r}")
    api_key_env = table.get("api_key_env", DEFAULT_API_KEY_ENV)
    return OpenAIAdapter(
        api_key=env.get(api_key_env) or None,
        api_key_env=api_key_env,
        base_url=base_url,
        max_retries=max_retries,
        timeout=timeout,
        context_window=context_window,
        extra_headers=lambda request: plugin_headers(host.hook, request),
    )


def plugin_headers(hook: HookRelay, request: ModelRequest) -> dict[str, str]:
    """The headers every plugin's `dsh_model_request_headers` adds, merged in call order."""
    headers: dict[str, str] = {}
    for added in hook.dsh_model_request_headers(provider=request.provider, request=request):
        if added:
            headers.update(added)
    return headers
