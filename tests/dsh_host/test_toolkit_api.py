"""The toolkit surface a custom host uses: Config.from_mapping, Host.start(plugins=), open_agent,
submit/compose, tickets, and the store seam (`dsh_register_stores`, store I/O off the loop)."""

from __future__ import annotations

import asyncio
import threading
import typing
from pathlib import Path
from typing import Any

import pytest

import dsh_host
from dsh_host import (
    ComposeError,
    Composition,
    Config,
    ConfigError,
    Host,
    PluginError,
    SessionStore,
    SqliteSessionStore,
    Tool,
    ToolResult,
    hookimpl,
)
from dsh_host.agent.tickets import DROPPED
from dsh_host.log import Violation, check_log
from dsh_host.testing import appended


def config(tmp_path: Path, **host: Any) -> Config:
    return Config.from_mapping({"host": {"plugins": [], "data_dir": str(tmp_path / "data"), **host}})


# -- configuration in code ------------------------------------------------------------------------


def test_config_from_mapping_validates_as_a_file_does(tmp_path):
    with pytest.raises(ConfigError, match=r"^code: \[host\] unknown key 'colour'"):
        Config.from_mapping({"host": {"colour": "blue"}})
    with pytest.raises(ConfigError, match=r"^code: \[host\] model must be str, got 3$"):
        Config.from_mapping({"host": {"model": 3}})
    with pytest.raises(ConfigError, match=r"^code: \[stores.sqlite\] must be a table"):
        Config.from_mapping({"stores": {"sqlite": 1}})
    built = Config.from_mapping({"host": {"store": "sqlite"}, "stores": {"sqlite": {"path": "x.db"}}})
    assert built.store_name == "sqlite"
    assert built.store_table("sqlite") == {"path": "x.db"}
    assert built.origins["host.store"] == "code"
    assert Config.from_mapping({}).store_name == "sqlite"


# -- plugins handed to Host.start ----------------------------------------------------------------


class Recorder:
    """A throwaway plugin object: records its mount table and offers a service."""

    def __init__(self) -> None:
        self.tables: list[dict[str, Any]] = []

    @hookimpl
    def dsh_mount(self, host, config):
        self.tables.append(config)
        host.services.register("recorder", self)


def test_host_start_mounts_plugin_objects_after_the_configured_ones(tmp_path):
    plugin = Recorder()
    mapping = {"host": {"plugins": [], "data_dir": str(tmp_path)}, "plugins": {"mine": {"x": 1}}}
    with Host.start(Config.from_mapping(mapping), plugins={"mine": plugin}) as host:
        assert host.services.recorder is plugin
        assert [p.name for p in host.mounted] == ["mine"]
        assert host.services.owner_of("recorder") == "mine"
    assert plugin.tables == [{"x": 1}]


def test_host_start_refuses_a_plugin_name_taken_by_configuration(tmp_path):
    mapping = {"host": {"plugins": ["fs-read"], "data_dir": str(tmp_path)}}
    with pytest.raises(PluginError, match="'fs-read' is both configured and given"):
        Host.start(Config.from_mapping(mapping), plugins={"fs-read": Recorder()})


# -- agents, submit, compose, tickets ------------------------------------------------------------


async def test_submit_runs_one_turn_and_returns_its_result(tmp_path):
    async with Host.start(config(tmp_path)) as host:
        agent = await host.open_agent(cwd=tmp_path)
        assert agent.session.cwd == str(tmp_path)
        result = await agent.submit("hello there")
        last = [e for e in agent.session.events if e.type == "assistant/message"][-1]
        assert result.session_id == agent.session.id
        assert (result.turn, result.reason, result.ok) == (1, "completed", True)
        assert result.text == "".join(b["text"] for b in last.data["content"]) != ""
        second = await agent.submit("and again")
        assert second.turn == 2
        await agent.close()
        assert agent.status == "disposed"
    # The async context manager closed the host after the agent flushed its session.
    with Host.start(config(tmp_path)) as host:
        assert [r.id for r in host.store.list_sessions()] == [agent.session.id]


async def test_open_agent_resumes_a_stored_session(tmp_path):
    async with Host.start(config(tmp_path)) as host:
        agent = await host.open_agent(cwd=tmp_path)
        await agent.submit("one")
        await agent.close()
        session_id = agent.session.id
    async with Host.start(config(tmp_path)) as host:
        again = await host.open_agent(session_id)
        assert (await again.submit("two")).turn == 2
        await again.close()


class Shouting:
    """A throwaway composing plugin: upper-cases text and attaches a context; refuses 'no'."""

    @hookimpl
    def dsh_compose_message(self, agent, text, signal):
        if text == "no":
            raise ComposeError("Refused: no", code="NOPE")
        if text.startswith("plain"):
            return None  # abstain: the host's default composes it

        async def compose() -> Composition:
            context = {"content": [{"type": "text", "text": "ctx"}], "source": {"kind": "plugin", "plugin": "shout"}}
            return Composition([{"type": "text", "text": text.upper()}], [context])

        return compose()


async def test_compose_goes_through_the_hook_and_sends_nothing(tmp_path):
    async with Host.start(config(tmp_path), plugins={"shout": Shouting()}) as host:
        agent = await host.open_agent(cwd=tmp_path)
        composed = await agent.compose("hi")
        assert composed.content == [{"type": "text", "text": "HI"}]
        assert len(composed.contexts) == 1
        assert (await agent.compose("plain words")) == Composition.text("plain words")
        assert agent.session.seq == 0
        with pytest.raises(ComposeError, match=r"^Refused: no$") as failure:
            await agent.submit("no")
        assert failure.value.code == "NOPE"
        assert agent.session.seq == 0  # nothing was sent
        result = await agent.submit("hey")
        users = [e for e in agent.session.events if e.type == "user/message"]
        assert users[0].data["content"] == [{"type": "text", "text": "HEY"}]
        assert [e.type for e in agent.session.events].count("context/message") == 1
        assert result.reason == "completed"
        await agent.close()


async def test_compose_default_is_the_text_as_typed(tmp_path):
    async with Host.start(config(tmp_path)) as host:
        agent = await host.open_agent(cwd=tmp_path)
        assert await agent.compose("look @[x](dsh-session:abc)") == Composition.text("look @[x](dsh-session:abc)")
        await agent.close()


async def test_tickets_name_the_turn_that_consumed_each_message(tmp_path):
    script = [{"hang": True}, {"text": "after"}, {"text": "third"}]
    mapping = {
        "host": {"plugins": [], "data_dir": str(tmp_path)},
        "models": {"scripted": {"script": _script(tmp_path, script)}},
    }
    async with Host.start(Config.from_mapping(mapping)) as host:
        agent = await host.open_agent(cwd=tmp_path)
        first = agent.send("first")
        await appended(agent.session, lambda e: e.type == "assistant/chunk")  # the model hangs now
        steered = agent.steer("steer me")
        queued = agent.send("queued")
        assert steered.steering and not queued.steering
        agent.cancel()
        assert (await first.result()).reason == "aborted"
        # The cancel dropped what was waiting; no turn consumed them.
        assert (await queued.result()).reason == DROPPED
        assert (await steered.result()).turn is None
        later = agent.send("later")
        result = await later.result()
        assert (result.turn, result.reason, result.text) == (2, "completed", "after")
        await agent.close()


async def test_steering_is_consumed_by_the_running_turn(tmp_path):
    gate = asyncio.Event()
    called = asyncio.Event()

    async def wait(arguments, context):
        called.set()
        await gate.wait()
        return ToolResult.text("waited")

    class Tools:
        @hookimpl
        def dsh_register_tools(self, register):
            register(Tool("wait", "waits for the test", {"type": "object", "properties": {}}, wait))

    script = [{"tool_call": {"id": "c1", "name": "wait", "arguments": {}}}, {"text": "done"}]
    mapping = {
        "host": {"plugins": [], "data_dir": str(tmp_path)},
        "models": {"scripted": {"script": _script(tmp_path, script)}},
    }
    async with Host.start(Config.from_mapping(mapping), plugins={"tools": Tools()}) as host:
        agent = await host.open_agent(cwd=tmp_path)
        first = agent.send("go")
        await called.wait()  # the turn is inside its tool
        steered = await asyncio.wait_for(_steer_after(agent, gate), 10)
        one, two = await first.result(), await steered.result()
        assert one == two
        assert (two.turn, two.reason, two.text) == (1, "completed", "done")
        assert steered.steering
        await agent.close()


async def _steer_after(agent, gate):
    ticket = agent.steer("also this")
    gate.set()
    return ticket


def _script(tmp_path: Path, entries: list[Any]) -> str:
    import json

    path = tmp_path / "script.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return str(path)


# -- the store seam ------------------------------------------------------------------------------


class GatedStore:
    """A store wrapping SQLite whose calls block while `gate` is closed (a slow disk)."""

    def __init__(self, inner: SqliteSessionStore) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name == "close" or not callable(attribute):
            return attribute

        def gated(*args: Any, **kwargs: Any) -> Any:
            if not self.gate.is_set():
                self.waiting.set()
                self.gate.wait(30)
            return attribute(*args, **kwargs)

        return gated


class GatedStores:
    """A throwaway plugin registering `gated` through `dsh_register_stores`."""

    def __init__(self) -> None:
        self.opened: list[tuple[Any, dict[str, Any]]] = []
        self.store: GatedStore | None = None

    @hookimpl
    def dsh_register_stores(self, register):
        def factory(host, table):
            self.opened.append((host, table))
            self.store = GatedStore(SqliteSessionStore.open(host.data_dir / "gated.sqlite3"))
            return self.store

        register("gated", factory)


def gated_config(tmp_path: Path) -> Config:
    return Config.from_mapping(
        {
            "host": {"plugins": [], "data_dir": str(tmp_path), "store": "gated"},
            "stores": {"gated": {"speed": "slow"}},
        }
    )


def test_a_store_registered_through_the_hook_is_selected_by_configuration(tmp_path):
    plugin = GatedStores()
    with Host.start(gated_config(tmp_path), plugins={"gated": plugin}) as host:
        assert host.store is plugin.store
        assert isinstance(host.store.inner, SessionStore)
        assert plugin.opened == [(host, {"speed": "slow"})]
    assert (tmp_path / "gated.sqlite3").exists()


def test_an_unknown_store_is_a_config_error_naming_the_known_ones(tmp_path):
    with Host.start(config(tmp_path, store="nowhere")) as host, pytest.raises(ConfigError) as failure:
        host.store  # noqa: B018 - opening is the point
    assert str(failure.value) == "[host] store: unknown store 'nowhere'; registered stores: sqlite"


def test_the_sqlite_store_table_is_validated(tmp_path):
    mapping = {"host": {"plugins": [], "data_dir": str(tmp_path)}, "stores": {"sqlite": {"pth": "x"}}}
    with Host.start(Config.from_mapping(mapping)) as host, pytest.raises(ConfigError, match="unknown key 'pth'"):
        host.store  # noqa: B018


async def test_a_blocked_store_never_stalls_the_event_loop(tmp_path):
    """While a flush hangs in the store, the loop keeps running and a cancel settles the turn."""
    plugin = GatedStores()
    script = [{"hang": True}]
    mapping = {
        "host": {"plugins": [], "data_dir": str(tmp_path), "store": "gated"},
        "models": {"scripted": {"script": _script(tmp_path, script)}},
    }
    async with Host.start(Config.from_mapping(mapping), plugins={"gated": plugin}) as host:
        agent = await host.open_agent(cwd=tmp_path)
        store = await asyncio.to_thread(lambda: host.store)
        store.gate.clear()
        ticket = agent.send("hello")
        # The pre-request flush is stuck in the store; the loop still delivers this thread's answer.
        await asyncio.to_thread(store.waiting.wait, 10)
        agent.cancel()
        result = await asyncio.wait_for(ticket.result(), 10)
        assert result.reason == "aborted"
        assert not store.gate.is_set()  # settled while the store was still blocked
        store.gate.set()
        await agent.close()
    with Host.start(config(tmp_path)) as check:
        stored = SqliteSessionStore.open(tmp_path / "gated.sqlite3")
        _, events = stored.read_events(agent.session.id)
        assert events[-1].type == "turn/end"
        assert events[-1].data["reason"]["kind"] == "aborted"
        stored.close()
        assert check.config.store_name == "sqlite"


async def test_a_blocked_store_read_does_not_block_other_work(tmp_path):
    plugin = GatedStores()
    async with Host.start(gated_config(tmp_path), plugins={"gated": plugin}) as host:
        agent = await host.open_agent(cwd=tmp_path)
        await agent.submit("hi")
        await agent.close()
        host.sessions.forget(agent.session.id)
        store = plugin.store
        assert store is not None
        store.gate.clear()
        read = asyncio.ensure_future(host.services.session_query.read_surface(agent.session.id))
        await asyncio.to_thread(store.waiting.wait, 10)
        assert not read.done()  # the read waits in the store while the loop answered the thread above
        store.gate.set()
        snapshot = await read
        assert snapshot.header.id == agent.session.id


def test_the_public_api_is_documented():
    for name in dsh_host.__all__:
        if name.startswith("__"):
            continue
        value = getattr(dsh_host, name)
        if callable(value) and typing.get_origin(value) is None:  # type aliases carry no docstring
            assert (value.__doc__ or "").strip(), f"dsh_host.{name} needs a docstring"


# -- a plugin's own log rules ----------------------------------------------------------------------


class NoShouting:
    """A throwaway plugin owning one rule: no user message in capitals."""

    @hookimpl
    def dsh_log_invariants(self):
        def no_capitals(header, events):
            for event in events:
                if event.type == "user/message" and event.data["content"][0]["text"].isupper():
                    yield Violation(event.seq, "no-shouting", "a user message is all capitals")

        return [no_capitals]


async def test_a_plugin_adds_log_rules_through_dsh_log_invariants(tmp_path):
    async with Host.start(config(tmp_path), plugins={"calm": NoShouting()}) as host:
        agent = await host.open_agent(cwd=tmp_path)
        await agent.submit("HELLO")
        await agent.close()
        rules = [rule for contributed in host.hook.dsh_log_invariants() for rule in contributed]
        found = check_log(agent.session.header, agent.session.events, rules)
    assert [(v.rule, v.message) for v in found] == [("no-shouting", "a user message is all capitals")]
