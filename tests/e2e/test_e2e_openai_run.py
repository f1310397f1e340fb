"""`dsh run` against an OpenAI-compatible server on loopback: the whole stack, real parts only.

A scripted HTTP server streams Chat Completions events; `dsh run` runs as a real subprocess with
`model = "openai:deepseek-chat"` pointed at it and a key in the environment. The first reply asks
for fs-read's `read_file`, the second answers: the test checks what the server received (the
key, the prompt, the tool result in the second request) and what the session log holds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.dsh_host.sse_server import Reply, SSEServer
from tests.e2e.e2e_support import clean_env, dsh_command


def chunk(**delta) -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def finish(reason: str) -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def usage(prompt: int, completion: int) -> dict:
    return {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


async def run_dsh(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *dsh_command(), *args, cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode, out.decode(), err.decode()


async def test_dsh_run_streams_from_an_openai_compatible_server_with_a_tool_call(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    async with SSEServer() as server:
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
        server.replies.append(
            Reply.sse(
                [
                    chunk(role="assistant", content=""),
                    chunk(tool_calls=[call]),
                    chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"path": "notes.txt"}'}}]),
                    finish("tool_calls"),
                    usage(40, 8),
                    "[DONE]",
                ]
            )
        )
        server.replies.append(
            Reply.sse([chunk(content="The file says "), chunk(content="42."), finish("stop"), usage(70, 5), "[DONE]"])
        )
        (tmp_path / "dsh.toml").write_text(
            '[host]\nmodel = "openai:deepseek-chat"\nplugins = ["fs-read"]\n'
            f'[models.openai]\nbase_url = "{server.base_url}"\napi_key_env = "TEST_MODEL_KEY"\n',
            encoding="utf-8",
        )
        env = clean_env(tmp_path, DSH_HOME=str(tmp_path / "data"), TEST_MODEL_KEY="sk-loopback")
        code, out, err = await run_dsh(tmp_path, env, "run", "What does notes.txt say?")

    assert code == 0, err
    assert out.strip() == "The file says 42."
    assert "scripted" not in err  # a key was configured: the real client answered
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer sk-loopback"
    body = first.json()
    assert body["model"] == "deepseek-chat" and body["stream"] is True
    assert body["messages"][-1] == {"role": "user", "content": "What does notes.txt say?"}
    assert sorted(tool["function"]["name"] for tool in body["tools"]) == ["list_dir", "read_file"]
    tool_message = second.json()["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "the answer is 42" in tool_message["content"]

    session_id = err.strip().splitlines()[-1].removeprefix("session: ")
    code, shown, err = await run_dsh(tmp_path, env, "sessions", "show", session_id, "--json")
    assert code == 0, err
    events = [json.loads(line) for line in shown.splitlines()]
    types = [e["type"] for e in events]
    assert types.count("request/header") == 1 and types.count("step/start") == 2
    call_event = next(e for e in events if e["type"] == "tool/call")
    result = next(e for e in events if e["type"] == "tool/result")
    assert call_event["data"]["name"] == "read_file" and result["sourceEventSeqs"] == [call_event["seq"]]
    assert result["data"]["isError"] is False
    assert events[-1]["data"]["reason"] == {"kind": "completed"}
    header = next(e for e in events if e["type"] == "request/header")["data"]["header"]
    assert header["config"] == {"provider": "openai", "model": "deepseek-chat"}
