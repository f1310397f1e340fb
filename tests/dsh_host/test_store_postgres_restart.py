"""The PostgreSQL store across a server restart, for a host that lives on (`dsh acp`, the chat UI).

A restart in the middle of a turn fails that turn with one line and writes nothing half-way; once
the server is back, the same host runs its next turn (the pool connects again and the lease is
taken again). A session another host took while the lease was lost is given up, in one line.

These tests stop and start a server of their own (`.ci/postgres start`, `down`, `up`), never
the shared one `DSH_TEST_POSTGRES_DSN` names.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from dsh_host import Config, Event, Host, hookimpl
from dsh_host.cli.stderr import logging_to_stderr
from dsh_host.log import check_log
from dsh_host.models import AdapterFactory
from dsh_host.models.base import ModelRequest
from dsh_host.models.scripted import ScriptedAdapter, text_response
from dsh_host.testing import Database, PostgresServer
from tests.acp.harness import wire

CI_POSTGRES = Path(__file__).resolve().parents[2] / ".ci" / "postgres"


@dataclass
class OwnServer:
    """A throwaway PostgreSQL server only these tests use, which they may stop and start."""

    directory: Path
    server: PostgresServer

    def down(self) -> None:
        subprocess.run([str(CI_POSTGRES), "down", str(self.directory)], check=True, capture_output=True)

    def up(self) -> None:
        subprocess.run([str(CI_POSTGRES), "up", str(self.directory)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnServer]:
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        reason = "no PostgreSQL server binaries to start a server of this test's own (apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    # Under /tmp itself: the server runs as another user, who must reach the folder.
    directory = Path(tempfile.mkdtemp(prefix="dsh-restart-postgres-"))
    started = subprocess.run([str(CI_POSTGRES), "start", str(directory)], capture_output=True, text=True, check=True)
    dsn = re.fullmatch(r"export DSH_TEST_POSTGRES_DSN='(.*)'\n", started.stdout)
    assert dsn is not None, started.stdout
    pgpass = tmp_path_factory.mktemp("restart-pgpass") / "pgpass"
    pgpass.touch(mode=0o600)
    server = PostgresServer(dsn.group(1), pgpass)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PGPASSFILE", str(pgpass))
            mp.delenv("PGPASSWORD", raising=False)
            yield OwnServer(directory, server)
    finally:
        subprocess.run([str(CI_POSTGRES), "stop", str(directory)], capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def database(own_server: OwnServer) -> Database:
    return own_server.server.database()


class HeldModel:
    """The provider `held`: answers each request from its script, the ones marked `None` only once let go."""

    def __init__(self, answers: Sequence[str | None]) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self._answers = list(answers)

    @hookimpl
    def dsh_register_models(self, register: Callable[[str, AdapterFactory], None]) -> None:
        register("held", lambda host: ScriptedAdapter([self._entry(text) for text in self._answers]))

    def _entry(self, text: str | None) -> Any:
        if text is not None:
            return text_response(text)

        async def held(request: ModelRequest) -> Any:
            self.reached.set()
            await self.release.wait()
            return text_response("answered late")

        return held


def start_host(database: Database, tmp_path: Path, model: HeldModel, *, session_query: bool = True) -> Host:
    config = {
        "host": {"plugins": [], "data_dir": str(tmp_path), "store": "postgres", "model": "held"},
        "stores": {"postgres": {"dsn": database.dsn()}},
    }
    return Host.start(Config.from_mapping(config), plugins={"held": model}, session_query=session_query)


def turn_ends(events: Sequence[Event]) -> list[str]:
    return [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]


async def test_a_restart_mid_turn_fails_that_turn_in_one_line_and_acp_runs_the_next_once_it_is_back(
    own_server, database, tmp_path
):
    model = HeldModel(["one", None, "three"])
    async with start_host(database, tmp_path, model, session_query=False) as host, wire(host) as connection:
        await connection.client.initialize(protocol_version=1)
        session_id = (await connection.client.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        first = await connection.client.prompt(session_id=session_id, prompt=[text_block(text="one")])
        assert first.stop_reason == "end_turn"

        second = asyncio.ensure_future(connection.client.prompt(session_id=session_id, prompt=[text_block(text="two")]))
        await model.reached.wait()  # mid-turn: the model holds its answer
        stored_before = host.store.read_lines(session_id)[1]
        await asyncio.to_thread(own_server.down)
        model.release.set()
        with pytest.raises(RequestError) as failed:
            await second
        message = str(failed.value)
        assert message.startswith("Internal error: turn failed: PostgreSQL store: cannot connect: ")
        assert "\n" not in message

        await asyncio.to_thread(own_server.up)
        third = await connection.client.prompt(session_id=session_id, prompt=[text_block(text="three")])
        assert third.stop_reason == "end_turn"
        live = connection.server._sessions[session_id].agent.session

        header, events = host.store.read_events(session_id)
        # Nothing was lost or written half-way: what the failed turn wrote before the server went
        # away is stored as it was, and the rest followed with the next turn's first flush.
        assert [e.to_line() for e in events[: len(stored_before)]] == stored_before
        assert [e.to_line() for e in events] == [e.to_line() for e in live.events]
        assert turn_ends(events) == ["completed", "error", "completed"]
        assert not check_log(header, events)


async def test_a_restart_between_turns_goes_unnoticed(own_server, database, tmp_path):
    model = HeldModel(["one", "two"])
    async with start_host(database, tmp_path, model) as host:
        agent = await host.open_agent(cwd=tmp_path)
        assert (await agent.submit("one")).ok
        await asyncio.to_thread(own_server.down)
        await asyncio.to_thread(own_server.up)

        assert (await agent.submit("two")).ok  # the lease is taken again on the first write
        assert [r.id for r in await host.services.session_query.list_sessions()] == [agent.session.id]
        await agent.close()
        assert turn_ends(host.store.read_events(agent.session.id)[1]) == ["completed", "completed"]


async def test_a_session_taken_while_the_lease_was_lost_is_given_up_in_one_line(own_server, database, tmp_path):
    model = HeldModel(["one", "never sent", "never sent"])
    async with (
        start_host(database, tmp_path / "a", model) as first,
        start_host(database, tmp_path / "b", HeldModel(["taken"])) as second,
    ):
        agent = await first.open_agent(cwd=tmp_path)
        assert (await agent.submit("one")).ok
        session_id = agent.session.id
        await asyncio.to_thread(own_server.down)
        await asyncio.to_thread(own_server.up)
        taker = await second.open_agent(session_id)  # the first host's lock died with its connection

        taken_over = f'session "{session_id}" was taken over by another dsh; this one stopped driving it'
        for _ in range(2):  # and stays given up
            result = await agent.submit("again")
            assert result.reason == "error"
            assert result.end["message"] == taken_over
        assert first.sessions.get(session_id) is None

        assert (await taker.submit("mine now")).ok
        await taker.close()
        header, events = second.store.read_events(session_id)
        assert turn_ends(events) == ["completed", "completed"]
        assert "again" not in [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
        assert not check_log(header, events)
        await agent.close()


async def test_acp_answers_a_prompt_on_a_session_taken_while_its_lease_was_lost_with_a_one_line_error(
    own_server, database, tmp_path
):
    model = HeldModel(["one", "never sent"])
    async with (
        start_host(database, tmp_path / "a", model, session_query=False) as first,
        wire(first) as connection,
        start_host(database, tmp_path / "b", HeldModel(["taken"])) as second,
    ):
        await connection.client.initialize(protocol_version=1)
        session_id = (await connection.client.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        assert (await connection.client.prompt(session_id=session_id, prompt=[text_block(text="one")])).stop_reason == (
            "end_turn"
        )
        await asyncio.to_thread(own_server.down)
        await asyncio.to_thread(own_server.up)
        taker = await second.open_agent(session_id)  # the ACP host's lock died with its connection

        with pytest.raises(RequestError) as refused:
            await connection.client.prompt(session_id=session_id, prompt=[text_block(text="again")])
        assert str(refused.value) == (
            f'Internal error: turn failed: session "{session_id}" was taken over by another dsh; '
            "this one stopped driving it"
        )
        assert (await taker.submit("mine now")).ok
        await taker.close()
        header, events = second.store.read_events(session_id)
        assert turn_ends(events) == ["completed", "completed"]
        assert not check_log(header, events)


@pytest.mark.parametrize("debug", [False, True])
def test_the_command_line_shows_the_drivers_own_warnings_only_with_debug(capsys, debug):
    # A restarted server makes psycopg warn of each broken connection; dsh says what failed itself.
    with logging_to_stderr(debug):
        logging.getLogger("psycopg.pool").warning("discarding broken connection")
    assert capsys.readouterr().err == ("dsh: warning: discarding broken connection\n" if debug else "")
