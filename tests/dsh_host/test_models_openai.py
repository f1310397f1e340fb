"""The OpenAI-compatible adapter against a real HTTP server on loopback, plus its pure parts."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_compact.plugin
from dsh_host import builtins, hookimpl
from dsh_host.config import load_config
from dsh_host.errors import ConfigError
from dsh_host.models.assembler import StreamAssembler
from dsh_host.models.base import ModelFailure, ModelRequest, ToolSchema
from dsh_host.models.openai import (
    OpenAIAdapter,
    create,
    failure_from_response,
    map_finish_reason,
    map_usage,
    parse_retry_after,
    plugin_headers,
)
from dsh_host.plugins import new_plugin_manager
from tests.dsh_host.sse_server import Reply, SSEServer, sse_event


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours proxy variables; loopback traffic must not leave the machine.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def server():
    async with SSEServer() as running:
        yield running


def adapter_for(server: SSEServer, **kw) -> OpenAIAdapter:
    options = {"api_key": "sk-test", "base_url": server.base_url, "backoff_base": 0.0, **kw}
    return OpenAIAdapter(**options)


def hooks(*plugins):
    pm = new_plugin_manager()
    for plugin in (builtins, *plugins):
        pm.register(plugin)
    return pm.hook


COMPACT_HOOKS = hooks(dsh_compact.plugin)


def compact_headers(req: ModelRequest) -> dict[str, str]:
    """The headers the compact plugin adds, as `create` wires them for a host with it mounted."""
    return plugin_headers(COMPACT_HOOKS, req)


def request(*messages: dict, **kw) -> ModelRequest:
    messages = messages or ({"role": "user", "content": [{"type": "text", "text": "hi"}]},)
    return ModelRequest(provider="openai", model="deepseek-chat", messages=list(messages), **kw)


async def collect(adapter: OpenAIAdapter, req: ModelRequest) -> list[dict]:
    return [chunk async for chunk in adapter.stream(req)]


def delta(**fields) -> dict:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": fields, "finish_reason": None}],
    }


def finished(reason: str) -> dict:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
    }


def usage(**counts) -> dict:
    return {"object": "chat.completion.chunk", "choices": [], "usage": counts}


def tool_delta(index: int, *, id=None, name=None, arguments=None) -> dict:
    call: dict = {"index": index}
    if id is not None:
        call.update(id=id, type="function")
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    if function:
        call["function"] = function
    return delta(tool_calls=[call])


# --- streaming -----------------------------------------------------------------------------------


async def test_text_usage_and_finish(server: SSEServer):
    server.replies.append(
        Reply.sse(
            [
                b": keep-alive\n\n",
                delta(role="assistant", content=""),
                delta(content="Hel"),
                delta(content="lo"),
                finished("stop"),
                usage(prompt_tokens=50, completion_tokens=2, prompt_cache_hit_tokens=32),
                "[DONE]",
            ]
        )
    )
    assert await collect(adapter_for(server), request()) == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
        {"type": "usage", "usage": {"inputTokens": 18, "outputTokens": 2, "cacheReadTokens": 32}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


async def test_reasoning_content_becomes_a_reasoning_block(server: SSEServer):
    server.replies.append(
        Reply.sse(
            [
                delta(reasoning_content="Think", content=None),
                delta(reasoning_content="ing."),
                delta(content="Answer", reasoning_content=None),
                finished("length"),
                usage(
                    prompt_tokens=10,
                    completion_tokens=30,
                    prompt_tokens_details={"cached_tokens": 0},
                    completion_tokens_details={"reasoning_tokens": 24},
                ),
                "[DONE]",
            ]
        )
    )
    chunks = await collect(adapter_for(server), request())
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "Think"},
        {"type": "reasoning-delta", "index": 0, "text": "ing."},
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "text-delta", "index": 1, "text": "Answer"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "Thinking."}},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "Answer"}},
        {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 6, "reasoningTokens": 24}},
        {"type": "finish", "reason": {"kind": "max-tokens"}},
    ]


async def test_tool_calls_split_across_deltas_and_network_reads(server: SSEServer):
    events = [
        delta(content="Let me look."),
        tool_delta(0, id="call_a", name="read", arguments=""),
        tool_delta(0, arguments='{"path":'),
        tool_delta(1, id="call_b", name="list", arguments='{"dir":"."}'),
        tool_delta(0, arguments='"a.txt"}'),
        finished("tool_calls"),
        usage(prompt_tokens=5, completion_tokens=9),
    ]
    # One byte stream cut at awkward places: inside JSON, inside a CRLF, inside "data:".
    stream = b"".join(sse_event(e) for e in events).replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"
    cuts = [7, 60, 61, 200, 333, len(stream) - 3]
    pieces = [stream[a:b] for a, b in itertools.pairwise([0, *cuts, len(stream)])]
    server.replies.append(Reply(headers={"content-type": "text/event-stream"}, pieces=pieces))

    chunks = await collect(adapter_for(server), request())
    calls = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert calls == [
        {"type": "tool-call-delta", "index": 1, "id": "call_a", "name": "read", "argumentsDelta": ""},
        {"type": "tool-call-delta", "index": 1, "id": "call_a", "argumentsDelta": '{"path":'},
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "call_b",
            "name": "list",
            "argumentsDelta": '{"dir":"."}',
        },
        {"type": "tool-call-delta", "index": 1, "id": "call_a", "argumentsDelta": '"a.txt"}'},
    ]
    assembler = StreamAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    message = assembler.finish()
    assert message.content == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool-call", "id": "call_a", "name": "read", "arguments": '{"path":"a.txt"}'},
        {"type": "tool-call", "id": "call_b", "name": "list", "arguments": '{"dir":"."}'},
    ]
    assert message.finish == {"kind": "tool-calls"}
    assert message.usage == {"inputTokens": 5, "outputTokens": 9}


async def test_a_stream_closed_mid_way_is_interrupted(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="par")], then="close", headers={"x-request-id": "req-9"}))
    seen = []
    with pytest.raises(ModelFailure) as caught:
        async for chunk in adapter_for(server).stream(request()):
            seen.append(chunk)
    assert caught.value.code == "STREAM_INTERRUPTED"
    assert caught.value.request_id == "req-9"
    assert [c["type"] for c in seen] == ["block-start", "text-delta"]
    assert len(server.requests) == 1  # output was yielded: never retried


async def test_a_body_that_ends_without_done_or_finish_is_interrupted(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="par")]))
    with pytest.raises(ModelFailure, match="closed before the stream finished") as caught:
        await collect(adapter_for(server), request())
    assert caught.value.code == "STREAM_INTERRUPTED"


async def test_a_finish_reason_without_done_completes(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="ok"), finished("stop")]))
    chunks = await collect(adapter_for(server), request())
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}


async def test_invalid_json_in_an_event_is_a_bad_response(server: SSEServer):
    server.replies.append(Reply.sse(["{not json", "[DONE]"]))
    with pytest.raises(ModelFailure, match="invalid JSON") as caught:
        await collect(adapter_for(server), request())
    assert caught.value.code == "BAD_RESPONSE"


async def test_an_error_event_mid_stream_fails(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="a"), {"error": {"message": "overloaded"}}]))
    with pytest.raises(ModelFailure, match="overloaded") as caught:
        await collect(adapter_for(server), request())
    assert caught.value.code == "SERVER_ERROR"


async def test_content_filter_ends_with_an_error_finish(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="a"), finished("content_filter"), "[DONE]"]))
    chunks = await collect(adapter_for(server), request())
    assert chunks[-1]["reason"]["kind"] == "error"
    assert chunks[-1]["reason"]["failure"]["code"] == "CONTENT_FILTER"


# --- retries and HTTP errors ---------------------------------------------------------------------

OK_STREAM = [delta(content="ok"), finished("stop"), "[DONE]"]


async def test_429_with_retry_after_zero_then_success(server: SSEServer):
    server.replies.append(Reply.json(429, {"error": {"message": "slow down"}}, {"retry-after": "0"}))
    server.replies.append(Reply.sse(OK_STREAM))
    chunks = await collect(adapter_for(server, backoff_base=60.0), request())
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


async def test_429_exhausting_the_retries_is_a_rate_limit(server: SSEServer):
    for _ in range(3):
        server.replies.append(
            Reply.json(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "0", "x-request-id": "r1"})
        )
    with pytest.raises(ModelFailure) as caught:
        await collect(adapter_for(server, max_retries=2), request())
    failure = caught.value
    assert (failure.code, failure.status, failure.request_id) == ("RATE_LIMIT", 429, "r1")
    assert failure.retry_after_ms == 0
    assert failure.message == "HTTP 429: slow down"
    assert failure.to_json() == {
        "message": "HTTP 429: slow down",
        "code": "RATE_LIMIT",
        "status": 429,
        "providerRetryAfterMs": 0.0,
        "requestId": "r1",
    }
    assert len(server.requests) == 3


async def test_500_then_success(server: SSEServer):
    server.replies.append(Reply.json(500, {"error": {"message": "internal"}}))
    server.replies.append(Reply.sse(OK_STREAM))
    assert (await collect(adapter_for(server), request()))[-1]["type"] == "finish"
    assert len(server.requests) == 2


async def test_a_long_retry_after_is_reported_not_waited_for(server: SSEServer):
    server.replies.append(Reply.json(503, {"error": "busy"}, {"retry-after": "3600"}))
    with pytest.raises(ModelFailure) as caught:
        await collect(adapter_for(server), request())
    assert (caught.value.code, caught.value.retry_after_ms) == ("SERVER_ERROR", 3600000.0)
    assert len(server.requests) == 1


async def test_context_length_400_is_not_retried(server: SSEServer):
    message = "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens."
    server.replies.append(Reply.json(400, {"error": {"message": message, "type": "invalid_request_error"}}))
    with pytest.raises(ModelFailure) as caught:
        await collect(adapter_for(server), request())
    assert (caught.value.code, caught.value.status) == ("CONTEXT_WINDOW_EXCEEDED", 400)
    assert message in caught.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(("status", "code"), [(401, "AUTH"), (403, "AUTH"), (422, "BAD_REQUEST")])
async def test_client_errors(server: SSEServer, status: int, code: str):
    server.replies.append(Reply.json(status, {"error": {"message": "nope"}}))
    with pytest.raises(ModelFailure, match="nope") as caught:
        await collect(adapter_for(server), request())
    assert (caught.value.code, caught.value.status) == (code, status)
    assert len(server.requests) == 1


async def test_connection_refused_is_a_network_failure_after_retries():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    adapter = OpenAIAdapter(api_key="k", base_url=f"http://127.0.0.1:{port}", backoff_base=0.0, max_retries=1)
    with pytest.raises(ModelFailure) as caught:
        await collect(adapter, request())
    assert caught.value.code == "NETWORK"


async def test_a_missing_key_fails_without_a_request(server: SSEServer):
    adapter = adapter_for(server, api_key=None, api_key_env="MY_KEY")
    with pytest.raises(ModelFailure, match=r"no API key in \$MY_KEY") as caught:
        await collect(adapter, request())
    assert caught.value.code == "AUTH"
    assert server.requests == []


# --- cancellation --------------------------------------------------------------------------------


async def test_cancel_while_waiting_for_the_next_chunk(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="Hi")], then="stall"))
    signal = asyncio.Event()
    stream = adapter_for(server).stream(request(signal=signal))
    assert (await stream.__anext__())["type"] == "block-start"
    assert (await stream.__anext__())["type"] == "text-delta"
    pending = asyncio.ensure_future(stream.__anext__())
    await server.stalled.wait()
    signal.set()
    with pytest.raises(ModelFailure) as caught:
        await asyncio.wait_for(pending, 5)
    assert (caught.value.message, caught.value.code) == ("aborted", "ABORTED")
    await asyncio.wait_for(server.disconnected.wait(), 5)


async def test_cancel_while_waiting_for_the_response_headers(server: SSEServer):
    server.replies.append(Reply(stall_first=True))
    signal = asyncio.Event()
    pending = asyncio.ensure_future(collect(adapter_for(server), request(signal=signal)))
    await server.stalled.wait()
    signal.set()
    with pytest.raises(ModelFailure, match="aborted"):
        await asyncio.wait_for(pending, 5)
    await asyncio.wait_for(server.disconnected.wait(), 5)


async def test_an_already_set_signal_sends_nothing(server: SSEServer):
    signal = asyncio.Event()
    signal.set()
    with pytest.raises(ModelFailure, match="aborted"):
        await collect(adapter_for(server), request(signal=signal))
    assert server.requests == []


async def test_closing_the_stream_early_closes_the_connection(server: SSEServer):
    server.replies.append(Reply.sse([delta(content="Hi")], then="stall"))
    stream = adapter_for(server).stream(request())
    await stream.__anext__()
    await stream.aclose()
    await asyncio.wait_for(server.disconnected.wait(), 5)


# --- the request ---------------------------------------------------------------------------------


async def test_request_body_and_headers(server: SSEServer):
    server.replies.append(Reply.sse(OK_STREAM))
    result = {
        "type": "tool-result",
        "toolCallId": "call_1",
        "content": [{"type": "text", "text": "line 1\n"}, {"type": "text", "text": "line 2"}],
        "isError": False,
    }
    req = request(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<snapshot>"},
                {"type": "text", "text": "\n\n## My request:\n"},
                {"type": "text", "text": "read a.txt"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "I should read it."},
                {"type": "text", "text": "Reading."},
                {"type": "tool-call", "id": "call_1", "name": "read", "arguments": '{"path":"a.txt"}'},
            ],
            "provenance": {"provider": "openai", "model": "deepseek-chat"},
        },
        {"role": "user", "content": [result]},
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "id": "c2", "name": "ls", "arguments": "{}"}],
        },
        system="You are helpful.",
        tools=[
            {"name": "read", "description": "Read a file", "parameters": {"type": "object"}},
            ToolSchema("ls", "List", {"type": "object", "required": ("dir",)}),
        ],
        temperature=0.2,
        max_tokens=512,
        stop=["END"],
        purpose="compaction",
    )
    await collect(adapter_for(server, extra_headers=compact_headers), req)
    (received,) = server.requests
    assert (received.method, received.path) == ("POST", "/chat/completions")
    assert received.headers["authorization"] == "Bearer sk-test"
    assert received.headers["x-deepseek-harness-compact"] == "1"
    assert received.json() == {
        "model": "deepseek-chat",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "<snapshot>\n\n## My request:\nread a.txt"},
            {
                "role": "assistant",
                "content": "Reading.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path":"a.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "line 1\nline 2"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
            },
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}},
            },
            {
                "type": "function",
                "function": {
                    "name": "ls",
                    "description": "List",
                    "parameters": {"type": "object", "required": ["dir"]},
                },
            },
        ],
        "temperature": 0.2,
        "max_tokens": 512,
        "stop": ["END"],
    }


async def test_a_plain_request_has_no_optional_fields_or_compaction_header(server: SSEServer):
    server.replies.append(Reply.sse(OK_STREAM))
    await collect(adapter_for(server, extra_headers=compact_headers), request())
    (received,) = server.requests
    assert "x-deepseek-harness-compact" not in received.headers
    assert received.json() == {
        "model": "deepseek-chat",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


# --- pure parts ----------------------------------------------------------------------------------


def test_usage_counts_are_disjoint():
    assert map_usage({"prompt_tokens": 100, "completion_tokens": 40}) == {
        "inputTokens": 100,
        "outputTokens": 40,
    }
    assert map_usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 60},
            "completion_tokens_details": {"reasoning_tokens": 30},
        }
    ) == {"inputTokens": 40, "outputTokens": 10, "cacheReadTokens": 60, "reasoningTokens": 30}


@pytest.mark.parametrize(
    ("reason", "calls", "expected"),
    [
        ("stop", False, {"kind": "stop"}),
        ("stop", True, {"kind": "tool-calls"}),
        ("tool_calls", True, {"kind": "tool-calls"}),
        ("length", False, {"kind": "max-tokens"}),
        (None, False, {"kind": "stop"}),
    ],
)
def test_finish_reasons(reason, calls, expected):
    assert map_finish_reason(reason, has_tool_calls=calls) == expected


def test_unknown_finish_reason_is_an_error():
    reason = map_finish_reason("weird", has_tool_calls=False)
    assert reason["kind"] == "error" and reason["failure"]["code"] == "UNKNOWN_FINISH"


def test_retry_after_forms():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 250.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1500.0
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, now=now) == 30000.0
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_failure_bodies_that_are_not_json():
    failure = failure_from_response(502, {}, b"<html>Bad gateway</html>")
    assert (failure.code, failure.message) == ("SERVER_ERROR", "HTTP 502: <html>Bad gateway</html>")
    overflow = failure_from_response(400, {}, b"context_length_exceeded")
    assert overflow.code == "CONTEXT_WINDOW_EXCEEDED"


def test_context_window():
    assert OpenAIAdapter(api_key="k").context_window("deepseek-reasoner") == 128000
    assert OpenAIAdapter(api_key="k").context_window("gpt-unknown") is None
    assert OpenAIAdapter(api_key="k", context_window=64000).context_window("deepseek-chat") == 64000


class Tagger:
    """A throwaway plugin adding headers through `dsh_model_request_headers`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ModelRequest]] = []

    @hookimpl
    def dsh_model_request_headers(self, provider, request):
        self.seen.append((provider, request))
        if request.purpose == "tagged":
            return {"x-tag": request.session_id, "Authorization": "Bearer stolen"}
        return None


async def test_plugins_add_request_headers_but_never_replace_the_adapters_own(server: SSEServer, tmp_path: Path):
    tagger = Tagger()
    host = SimpleNamespace(config=load_config(env={}, cwd=tmp_path), hook=hooks(tagger))
    adapter = create(host, env={"DEEPSEEK_API_KEY": "sk-test"})
    adapter.base_url = server.base_url
    server.replies.extend([Reply.sse(OK_STREAM), Reply.sse(OK_STREAM)])
    await collect(adapter, request(purpose="tagged", session_id="s-1"))
    await collect(adapter, request())
    first, second = server.requests
    assert first.headers["x-tag"] == "s-1"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert "x-tag" not in second.headers
    assert [(provider, req.purpose) for provider, req in tagger.seen] == [("openai", "tagged"), ("openai", None)]


def test_create_from_config(tmp_path: Path):
    toml = '[models.openai]\nbase_url = "http://localhost:9/v1/"\napi_key_env = "K"\nmax_retries = 1\n'
    (tmp_path / "dsh.toml").write_text(toml)
    host = SimpleNamespace(config=load_config(env={}, cwd=tmp_path))
    adapter = create(host, env={"K": "secret"})
    assert (adapter.base_url, adapter.api_key, adapter.max_retries) == ("http://localhost:9/v1", "secret", 1)
    assert create(host, env={}).api_key is None
    (tmp_path / "dsh.toml").write_text('[models.openai]\nbase_url = "ftp://x"\n')
    with pytest.raises(ConfigError, match="base_url must be an http"):
        create(SimpleNamespace(config=load_config(env={}, cwd=tmp_path)), env={})


# --- the event stream (parsed by httpx-sse) -------------------------------------------------------

EVENT_STREAM = {"content-type": "text/event-stream"}


def data_line(value: dict) -> bytes:
    return b"data: " + json.dumps(value, ensure_ascii=False).encode()


def texts(chunks: list[dict]) -> list[str]:
    return [c["text"] for c in chunks if c["type"] == "text-delta"]


async def test_event_fields_comments_multiline_data_and_a_byte_order_mark(server: SSEServer):
    first, rest = json.dumps(delta(content="a")).split(",", 1)
    body = (
        b"\xef\xbb\xbf"  # a byte order mark, then the first field: it must not hide the field's name
        + f"data: {first},\n".encode()
        + b": hello\nevent: note\nid: 7\n"
        + f"data:{rest}\n".encode()  # data lines join with a newline: still JSON
        + b"retry: 5\n\n"
        + b"id: 8\n\n"  # an event without data dispatches nothing
        + data_line(delta(content="b"))
        + b"\n\ndata: [DONE]\n\n"
    )
    server.replies.append(Reply(headers=EVENT_STREAM, pieces=[body]))
    assert texts(await collect(adapter_for(server), request())) == ["a", "b"]


async def test_line_breaks_of_every_kind_split_anywhere(server: SSEServer):
    stream = (
        data_line(delta(content="one"))
        + b"\r\n\r\n"
        + data_line(delta(content="two"))
        + b"\r\r"
        + data_line(delta(content="\u754c"))
        + b"\n\ndata: [DONE]\n\n"
    )
    first_cr = stream.index(b"\r")
    two = stream.index(b"two")
    wide = stream.index("\u754c".encode())
    cuts = [first_cr + 1, first_cr + 3, two + 1, wide + 1, wide + 2]
    pieces = [stream[a:b] for a, b in itertools.pairwise([0, *cuts, len(stream)])]
    server.replies.append(Reply(headers=EVENT_STREAM, pieces=pieces))
    assert texts(await collect(adapter_for(server), request())) == ["one", "two", "\u754c"]


async def test_an_event_left_open_at_the_end_is_dropped(server: SSEServer):
    # The finish event has no blank line after it: a dropped connection must not deliver it.
    pieces = [data_line(delta(content="complete")) + b"\n\n", data_line(finished("stop"))]
    server.replies.append(Reply(headers=EVENT_STREAM, pieces=pieces))
    seen = []
    with pytest.raises(ModelFailure) as caught:
        async for chunk in adapter_for(server).stream(request()):
            seen.append(chunk)
    assert caught.value.code == "STREAM_INTERRUPTED"
    assert texts(seen) == ["complete"]


async def test_a_success_that_is_not_an_event_stream_is_a_bad_response(server: SSEServer):
    server.replies.append(Reply.json(200, delta(content="x")))
    with pytest.raises(ModelFailure) as caught:
        await collect(adapter_for(server), request())
    assert (caught.value.code, caught.value.status) == ("BAD_RESPONSE", 200)
    assert "not an event stream" in caught.value.message


STREAM = (
    b": ping\r\n"
    + data_line(delta(content="\u00e9\U0001f600"))
    + b"\r\n\r\nevent: x\n"
    + data_line(delta(content="line"))
    + b"\n\n"
    + data_line(delta(content="last"))
    + b"\r\rdata: [DONE]\n\n"
)


@settings(max_examples=20)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_events_do_not_depend_on_how_the_stream_is_cut(cuts: list[int]):
    bounds = sorted(set(cuts) | {0, len(STREAM)})
    pieces = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]

    async def run() -> list[dict]:
        async with SSEServer() as running:
            running.replies.append(Reply(headers=EVENT_STREAM, pieces=pieces))
            return await collect(adapter_for(running), request())

    assert texts(asyncio.run(run())) == ["\u00e9\U0001f600", "line", "last"]
