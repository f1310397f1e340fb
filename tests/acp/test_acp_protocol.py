"""`dsh acp` in process: the SDK's client against the agent side (`dsh_host.acp.server`)."""

from __future__ import annotations

import asyncio

import pytest
from acp import RequestError, resource_link_block, text_block

from dsh_host import Config, Host, hookimpl
from dsh_host.testing import appended
from tests.acp.harness import acp_host, agent_of, data_of, turn_ends, wire

ANSWER = [{"text": "Hello from dsh"}]


async def start(connection, cwd="/tmp"):
    await connection.client.initialize(protocol_version=1)
    return (await connection.client.new_session(cwd=cwd, mcp_servers=[])).session_id


async def test_initialize_answers_version_1_text_only_and_keeps_client_capabilities(tmp_path):
    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            response = await connection.request(
                "initialize",
                {"protocolVersion": 7, "clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True}},
            )
            assert response == {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": False,
                    "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                },
                "authMethods": [],
                "agentInfo": {"name": "dsh", "version": "test"},
            }
            assert connection.server.client_capabilities.terminal is True
            assert await connection.request("authenticate", {"methodId": "none"}) == {}


async def test_a_prompt_streams_each_committed_text_block_then_answers_end_turn(tmp_path):
    script = [
        {"tool_call": {"id": "c1", "name": "nope", "arguments": {}}, "text": "Looking"},
        {"chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "Done"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Done"}},
            {"type": "block-start", "index": 1, "blockType": "text"},
            {"type": "text-delta", "index": 1, "text": " twice"},
            {"type": "block-end", "index": 1, "block": {"type": "text", "text": " twice"}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]},
    ]  # fmt: skip
    with acp_host(tmp_path, script) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            response = await connection.client.prompt(session_id=session_id, prompt=[text_block(text="hi")])
            assert response.stop_reason == "end_turn"
            assert connection.recorder.texts(session_id) == ["Looking", "Done", " twice"]
            # One chunk per block, all before the response, and nothing else was sent.
            methods = [f.get("method", "response") for f in connection.frames]
            assert methods == ["response", "response", *["session/update"] * 3, "response"]


async def test_text_blocks_are_joined_and_sent_as_one_user_message_without_contexts(tmp_path):
    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            prompt = [text_block(text="one "), text_block(text="two")]
            await connection.client.prompt(session_id=session_id, prompt=prompt)
            (message,) = data_of(agent_of(connection, session_id).session.events, "user/message")
            assert message == {"content": [{"type": "text", "text": "one two"}], "source": {"kind": "user"}}


@pytest.mark.parametrize(
    ("entry", "stop_reason"),
    [({"text": "x"}, "end_turn"), ({"max_tokens": "cut"}, "max_tokens")],
)
async def test_stop_reasons_follow_the_turn_end(tmp_path, entry, stop_reason):
    with acp_host(tmp_path, [entry]) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            response = await connection.client.prompt(session_id=session_id, prompt=[text_block(text="hi")])
            assert response.stop_reason == stop_reason


async def test_a_failed_turn_is_an_internal_error_naming_the_failure(tmp_path):
    with acp_host(tmp_path, [{"error": {"message": "the model is down", "code": "DOWN"}}]) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            with pytest.raises(RequestError) as raised:
                await connection.client.prompt(session_id=session_id, prompt=[text_block(text="hi")])
            assert raised.value.code == -32603
            assert str(raised.value).startswith("Internal error: turn failed: ")
            assert "the model is down" in str(raised.value)


async def test_session_new_for_a_model_without_its_key_is_an_error_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    config = Config.from_mapping(
        {"host": {"plugins": [], "data_dir": str(tmp_path / "data"), "model": "openai:deepseek-chat"}}
    )
    with Host.start(config, session_query=False) as host:
        async with wire(host) as connection:
            await connection.client.initialize(protocol_version=1)
            with pytest.raises(RequestError) as raised:
                await connection.request("session/new", {"cwd": "/tmp", "mcpServers": []})
            assert raised.value.code == -32603
            message = 'model "openai:deepseek-chat" needs an API key: set DEEPSEEK_API_KEY'
            assert str(raised.value) == f"Internal error: {message}"
            assert raised.value.data == {"details": message}
            assert connection.server._sessions == {}
        assert host.store.list_sessions() == []  # no session, and nothing answered in the model's place


@pytest.mark.parametrize(
    "params",
    [
        {"cwd": "relative/dir", "mcpServers": []},
        {"cwd": "/tmp", "mcpServers": [{"name": "x", "command": "/bin/true", "args": [], "env": []}]},
        {"cwd": "/tmp", "mcpServers": [{"not": "a server"}]},
        {"cwd": "/tmp", "mcpServers": [], "additionalDirectories": ["/srv"]},
        {"mcpServers": []},
    ],
)
async def test_session_new_rejects_what_it_does_not_serve(tmp_path, params):
    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            with pytest.raises(RequestError) as raised:
                await connection.request("session/new", params)
            assert raised.value.code == -32602
            assert str(raised.value).startswith("Invalid params: ")
            assert connection.server._sessions == {}


@pytest.mark.parametrize(
    "prompt",
    [
        [{"type": "resource_link", "uri": "file:///etc/hosts", "name": "hosts"}],
        [{"type": "text", "text": "look"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}],
        [{"type": "text", "text": " \n\t"}],
        [],
        [{"type": "mystery"}],
    ],
)
async def test_a_prompt_that_is_not_text_is_rejected_and_starts_no_turn(tmp_path, prompt):
    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            with pytest.raises(RequestError) as raised:
                await connection.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
            assert raised.value.code == -32602
            assert agent_of(connection, session_id).session.seq == 0


async def test_a_prompt_for_an_unknown_session_or_one_already_in_flight_is_rejected(tmp_path):
    with acp_host(tmp_path, [{"hang": True}, {"text": "after"}]) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            with pytest.raises(RequestError) as unknown:
                await connection.client.prompt(session_id="nope", prompt=[text_block(text="hi")])
            assert unknown.value.code == -32602
            first = asyncio.ensure_future(
                connection.client.prompt(session_id=session_id, prompt=[text_block(text="one")])
            )
            agent = agent_of(connection, session_id)
            await appended(agent.session, lambda e: e.type == "assistant/chunk")
            with pytest.raises(RequestError) as busy:
                await connection.client.prompt(session_id=session_id, prompt=[text_block(text="two")])
            assert busy.value.code == -32602
            assert len(data_of(agent.session.events, "turn/start")) == 1
            await connection.client.cancel(session_id=session_id)
            assert (await first).stop_reason == "cancelled"
            later = await connection.client.prompt(session_id=session_id, prompt=[text_block(text="three")])
            assert later.stop_reason == "end_turn"
            assert connection.recorder.texts(session_id) == ["after"]


async def test_cancel_settles_the_prompt_once_at_its_turn_end_and_never_a_later_one(tmp_path):
    with acp_host(tmp_path, [{"hang": True}, {"text": "second answer"}]) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            await connection.client.cancel(session_id=session_id)  # idle: a no-op
            await connection.client.cancel(session_id="unknown")  # unknown: a no-op
            first = asyncio.ensure_future(
                connection.client.prompt(session_id=session_id, prompt=[text_block(text="wait")])
            )
            agent = agent_of(connection, session_id)
            await appended(agent.session, lambda e: e.type == "assistant/chunk")
            await connection.client.cancel(session_id=session_id)
            await connection.client.cancel(session_id=session_id)
            assert (await first).stop_reason == "cancelled"
            second = await connection.client.prompt(session_id=session_id, prompt=[text_block(text="again")])
            assert second.stop_reason == "end_turn"
            # The aborted partial was never committed: only the second turn's answer was sent.
            assert connection.recorder.texts(session_id) == ["second answer"]
            assert turn_ends(agent.session.events) == ["aborted", "completed"]
            responses = [f for f in connection.frames if "result" in f and "stopReason" in (f["result"] or {})]
            assert [f["result"]["stopReason"] for f in responses] == ["cancelled", "end_turn"]


class Queued:
    """A throwaway plugin: `queued` is set when an agent queues a message (`dsh_agent_queued`)."""

    def __init__(self) -> None:
        self.queued = asyncio.Event()

    @hookimpl
    def dsh_agent_queued(self, agent, content, info):
        self.queued.set()


async def test_a_cancel_before_the_message_started_a_turn_settles_at_once(tmp_path):
    with acp_host(tmp_path, [{"hang": True}]) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            server = connection.server
            agent = agent_of(connection, session_id)
            # A turn the prompt must wait behind: its model hangs until the cancel.
            holding = agent.send([{"type": "text", "text": "hold"}])
            await appended(agent.session, lambda e: e.type == "assistant/chunk")
            plugin = Queued()
            host.pm.register(plugin, name="queued")
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "never"}]}
            pending = asyncio.ensure_future(server.handle("session/prompt", prompt, False))
            # Queued (the handler runs on until it awaits the turn), so the prompt is in flight.
            await plugin.queued.wait()
            await server.handle("session/cancel", {"sessionId": session_id}, True)
            assert (await pending).stop_reason == "cancelled"
            assert (await holding.result()).reason == "aborted"
            assert [data["turn"] for data in data_of(agent.session.events, "turn/start")] == [1]


@pytest.mark.parametrize(
    "method",
    [
        "session/load",
        "session/list",
        "session/resume",
        "session/close",
        "session/fork",
        "session/set_mode",
        "session/set_config_option",
        "_dsh/extension",
        "unheard/of",
    ],
)
async def test_every_other_method_is_method_not_found(tmp_path, method):
    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            with pytest.raises(RequestError) as raised:
                await connection.request(method, {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
            assert raised.value.code == -32601


async def test_two_sessions_on_one_connection_are_independent_and_one_is_cancelled(tmp_path):
    # The scripted model is shared: the first request hangs, the second answers.
    with acp_host(tmp_path, [{"hang": True}, {"text": "b answers"}]) as host:
        async with wire(host) as connection:
            a = await start(connection)
            b = (await connection.client.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            assert a != b
            waiting = asyncio.ensure_future(connection.client.prompt(session_id=a, prompt=[text_block(text="a")]))
            await appended(agent_of(connection, a).session, lambda e: e.type == "assistant/chunk")
            answered = await connection.client.prompt(session_id=b, prompt=[text_block(text="b")])
            assert answered.stop_reason == "end_turn"
            await connection.client.cancel(session_id=a)
            assert (await waiting).stop_reason == "cancelled"
            assert connection.recorder.texts(a) == []
            assert connection.recorder.texts(b) == ["b answers"]
            assert turn_ends(agent_of(connection, a).session.events) == ["aborted"]
            assert turn_ends(agent_of(connection, b).session.events) == ["completed"]


async def test_eof_mid_turn_settles_cancelled_disposes_the_agent_and_flushes_the_store(tmp_path):
    with acp_host(tmp_path, [{"hang": True}]) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            waiting = asyncio.ensure_future(
                connection.client.prompt(session_id=session_id, prompt=[text_block(text="wait")])
            )
            agent = agent_of(connection, session_id)
            await appended(agent.session, lambda e: e.type == "assistant/chunk")
            connection.close_client()
            await asyncio.wait_for(connection.serving, timeout=10)
            assert agent.disposed
            # The client end is closed, so the response cannot arrive; the frame was still settled.
            waiting.cancel()
        _, events = host.store.read_events(session_id)
        assert turn_ends(events) == ["disposed"]


async def test_a_session_close_stuck_past_the_shutdown_bound_is_cancelled_not_left_running(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr("dsh_host.acp.server.SHUTDOWN_TIMEOUT", 0.2)
    outcome: list[str] = []

    async def stuck_close() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            await connection.client.prompt(session_id=session_id, prompt=[text_block(text="hi")])
            monkeypatch.setattr(agent_of(connection, session_id), "close", stuck_close)
            await connection.eof()
        _, events = host.store.read_events(session_id)
    assert outcome == ["cancelled"]
    assert "1 session(s) did not close within 0.2 s" in caplog.text
    assert turn_ends(events) == ["completed"]


async def test_the_acp_host_has_no_session_query_and_a_mention_stays_text(tmp_path):
    mention = "compare with dsh-session:0123456789ab please"
    with acp_host(tmp_path, ANSWER) as host:
        assert host.services.get("session_query") is None
        async with wire(host) as connection:
            session_id = await start(connection)
            await connection.client.prompt(session_id=session_id, prompt=[text_block(text=mention)])
            acp_events = agent_of(connection, session_id).session.events
    # The same text sent on a host that never had session references or session query.
    plain = Host.start(
        Config.from_mapping(
            {
                "host": {"plugins": [], "data_dir": str(tmp_path / "plain")},
                "models": {"scripted": {"script": str(tmp_path / "script.json")}},
            }
        ),
        session_query=False,
    )
    async with plain:
        agent = await plain.open_agent(cwd="/tmp")
        await agent.send([{"type": "text", "text": mention}]).result()
        await agent.close()
        plain_events = agent.session.events
    assert [(e.type, e.data) for e in acp_events] == [(e.type, e.data) for e in plain_events]
    (message,) = data_of(acp_events, "user/message")
    assert message["content"] == [{"type": "text", "text": mention}]
    assert "contexts" not in message


async def test_resource_link_helper_blocks_are_rejected_through_the_sdk_client(tmp_path):
    with acp_host(tmp_path, ANSWER) as host:
        async with wire(host) as connection:
            session_id = await start(connection)
            link = resource_link_block(name="hosts", uri="file:///etc/hosts")
            with pytest.raises(RequestError) as raised:
                await connection.client.prompt(session_id=session_id, prompt=[text_block(text="see"), link])
            assert raised.value.code == -32602
