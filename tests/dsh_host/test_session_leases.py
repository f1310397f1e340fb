"""One driver per session: the host driving a session holds its lease, and no other host resumes,
repairs or writes it meanwhile; readers never wait for it.

Hosts of one test share a store (two hosts stand for two processes: each holds its own leases).
Processes, SIGKILL and the race of `dsh run` processes are in test_lease_processes.py; a
PostgreSQL server restart in test_store_postgres_restart.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from dsh_host import (
    Event,
    Host,
    Session,
    SessionBusy,
    SessionHeader,
    SessionNotFound,
    SessionRow,
    SqliteSessionStore,
    StoredTitle,
    StoreError,
    hookimpl,
)
from dsh_host.hookspecs import StoreFactory
from dsh_host.live_sessions import append_out_of_band
from dsh_host.testing import DshRunner, HostFactory
from tests.processes import dsh_command, hermetic_env
from tests.store_backends import PostgresBackend, SqliteBackend
from tests.terminal import Terminal

USER = {"kind": "user"}


def busy(session_id: str) -> str:
    return f"session {json.dumps(session_id)} is being driven by another dsh"


@pytest.fixture
def host_on(store_backend: SqliteBackend | PostgresBackend, make_host: HostFactory) -> Callable[..., Host]:
    """Start hosts on the backend's store (each test's hosts share it)."""

    def start(plugins: Sequence[str] = (), **options: Any) -> Host:
        if isinstance(store_backend, SqliteBackend):
            config: dict[str, Any] = {"stores": {"sqlite": {"path": str(store_backend.path)}}}
        else:
            config = {"host": {"store": "postgres"}, "stores": {"postgres": {"dsn": store_backend.database.dsn()}}}
        return make_host(plugins, config=config, **options)

    return start


async def stored_session(host: Host, tmp_path: Any) -> str:
    """A stored session of one completed turn, written and let go by `host`."""
    agent = await host.open_agent(cwd=tmp_path)
    await agent.submit("first")
    await agent.close()
    return agent.session.id


async def open_a_turn(host: Host, session_id: str) -> None:
    """Resume the session on `host` and flush an open turn, as a driver mid-turn would have it."""
    session = await host.sessions.resume(session_id)
    turn = session.last_turn_number() + 1
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    session.append("user/message", {"content": [{"type": "text", "text": "slow"}], "source": USER}, surface_op="append")
    await host.sessions.flush(session)


def turn_ends(events: Sequence[Event]) -> list[str]:
    return [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]


# -- a second driver is refused before it writes anything --------------------------------------------


async def test_a_second_host_is_refused_a_driven_session_before_it_writes(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    driver = await first.open_agent(session_id)
    _, before = second.store.read_lines(session_id)

    with pytest.raises(SessionBusy) as refused:
        await second.open_agent(session_id)

    assert str(refused.value) == busy(session_id) and "\n" not in str(refused.value)
    assert refused.value.session_id == session_id
    assert second.sessions.get(session_id) is None
    assert second.store.read_lines(session_id)[1] == before
    await driver.submit("still mine")
    await driver.close()  # the last agent of `first` on the session: its lease is given up
    taker = await second.open_agent(session_id)
    assert (await taker.submit("now mine")).ok
    await taker.close()
    assert turn_ends(second.store.read_events(session_id)[1]) == ["completed"] * 3


async def test_the_agents_of_one_host_share_its_lease_until_the_last_closes(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    one = await first.open_agent(session_id)
    two = await first.open_agent(session_id)
    assert two.session is one.session

    await one.close()
    with pytest.raises(SessionBusy):
        await second.open_agent(session_id)
    assert (await two.submit("the second agent drives on")).ok
    await two.close()
    assert first.sessions.get(session_id) is None
    taker = await second.open_agent(session_id)
    await taker.close()


async def test_releasing_a_session_lets_another_host_drive_it(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    session = await first.sessions.resume(session_id)
    append_out_of_band(session, "session/title", {"title": "kept"}, {"kind": "session-title"})

    await first.sessions.release(session_id)

    assert first.sessions.get(session_id) is None
    taken = await second.sessions.resume(session_id)
    assert taken.events[-2].data == {"title": "kept"}  # released after a flush


async def test_a_new_sessions_failed_first_write_keeps_its_lease_and_its_events(host_on, tmp_path, monkeypatch):
    first, second = host_on(), host_on()
    take = first.store.lease
    failures = [StoreError("disk full")]

    class FailingOnce:
        def __init__(self, lease: Any) -> None:
            self._lease = lease
            self.session_id = lease.session_id

        def append(self, header: Any, events: Any) -> None:
            if failures:
                raise failures.pop()
            self._lease.append(header, events)

        def release(self) -> None:
            self._lease.release()

    monkeypatch.setattr(first.store, "lease", lambda session_id, wait=0.0: FailingOnce(take(session_id, wait=wait)))
    session = first.sessions.create(str(tmp_path))
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})

    with pytest.raises(StoreError, match="disk full"):
        await first.sessions.flush(session)

    with pytest.raises(SessionBusy):  # the lease taken with the failed write is still held
        second.store.lease(session.id)
    await first.sessions.flush(session)  # through the same lease: nothing was lost
    assert [event.type for event in first.store.read_events(session.id)[1]] == ["turn/start"]
    await first.sessions.release(session.id)
    assert (await second.sessions.resume(session.id)).id == session.id


async def test_a_waiting_driver_takes_the_session_once_its_driver_lets_go(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    driver = await first.open_agent(session_id)
    waiting = asyncio.ensure_future(second.open_agent(session_id, wait=60))
    await driver.submit("before the waiter")
    await driver.close()

    waiter = await waiting
    assert (await waiter.submit("after the driver")).ok
    await waiter.close()
    assert turn_ends(second.store.read_events(session_id)[1]) == ["completed"] * 3


async def test_waiting_in_vain_says_how_long(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    await first.sessions.resume(session_id)
    with pytest.raises(SessionBusy) as refused:
        await second.open_agent(session_id, wait=0.05)
    assert str(refused.value) == f"session {json.dumps(session_id)} is still being driven by another dsh after 0.05 s"


# -- crash repair happens only under the lease --------------------------------------------------------


async def test_a_live_turn_is_never_repaired_by_another_host(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    await open_a_turn(first, session_id)

    with pytest.raises(SessionBusy):
        await second.sessions.resume(session_id)
    events = second.store.read_events(session_id)[1]
    assert events[-1].type == "user/message" and turn_ends(events) == ["completed"]

    first.sessions.forget(session_id)  # its driver is gone, the turn still open: as after a crash
    repaired = await second.sessions.resume(session_id)
    assert turn_ends(repaired.events) == ["completed", "interrupted"]
    assert turn_ends(second.store.read_events(session_id)[1]) == ["completed", "interrupted"]


# -- readers never take the lease ---------------------------------------------------------------------


async def test_reading_a_driven_session_never_waits_for_its_driver(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    await open_a_turn(first, session_id)
    query = second.services.session_query

    assert [r.id for r in await query.list_sessions()] == [session_id]
    assert (await query.read_surface(session_id)).header.id == session_id
    assert len(await query.read_events(session_id)) == len(second.store.read_lines(session_id)[1])
    assert [c.id for c in await query.search_candidates("slow", target_id=None, target_cwd=None, limit=5)] == [
        session_id
    ]


async def test_a_read_only_agent_composes_on_a_driven_session_and_writes_nothing(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    await open_a_turn(first, session_id)
    _, before = second.store.read_lines(session_id)

    reader = await second.open_agent(session_id, read_only=True)
    composition = await reader.compose("what would be sent")
    assert composition.content == ({"type": "text", "text": "what would be sent"},)
    assert reader.session.events[-1].type == "user/message"  # the open turn is not repaired
    assert second.sessions.get(session_id) is None
    await reader.close()

    assert second.store.read_lines(session_id)[1] == before
    with pytest.raises(SessionBusy):  # the read-only agent took no lease, and left `first` its own
        await second.open_agent(session_id)


async def test_a_read_only_copy_refuses_to_be_written(dsh_host, tmp_path):
    session_id = await stored_session(dsh_host, tmp_path)
    copy = await dsh_host.sessions.load(session_id)
    copy.append("session/title", {"title": "never stored"})
    with pytest.raises(StoreError, match="was opened read-only: nothing of it is written"):
        await dsh_host.sessions.flush(copy)
    assert dsh_host.store.read_title(session_id).title != "never stored"


# -- one publisher per host -----------------------------------------------------------------------------


class SessionEvents:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    @hookimpl
    def dsh_session_event(self, host: Host, session: Session, event: Event) -> None:
        self.seen.append((session.id, event.seq))


async def test_session_events_are_published_once_however_many_agents_share_the_session(make_host, tmp_path):
    events = SessionEvents()
    host = make_host(objects={"events": events})
    one = await host.open_agent(cwd=tmp_path)
    two = await host.open_agent(one.session.id)
    await one.submit("from the first agent")
    await one.close()  # the second agent publishes from here on
    await two.submit("from the second agent")
    await two.close()

    session = one.session
    assert events.seen == [(session.id, event.seq) for event in session.events]


# -- stores without leases ------------------------------------------------------------------------------


class PlainStore:
    """The SQLite store's operations, without its leases (a store that keeps none)."""

    def __init__(self, inner: SqliteSessionStore) -> None:
        self._inner = inner

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        self._inner.append(header, events)

    def import_log(self, header: SessionHeader, events: Sequence[Event], *, replace: bool = False) -> None:
        self._inner.import_log(header, events, replace=replace)

    def delete(self, session_id: str) -> bool:
        return self._inner.delete(session_id)

    def list_sessions(self) -> list[SessionRow]:
        return self._inner.list_sessions()

    def has(self, session_id: str) -> bool:
        return self._inner.has(session_id)

    def read_header(self, session_id: str) -> SessionHeader:
        return self._inner.read_header(session_id)

    def read_title(self, session_id: str) -> StoredTitle | None:
        return self._inner.read_title(session_id)

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        return self._inner.read_events(session_id)

    def close(self) -> None:
        self._inner.close()


class PlainStores:
    @hookimpl
    def dsh_register_stores(self, register: Callable[[str, StoreFactory], None]) -> None:
        register("plain", lambda host, table: PlainStore(SqliteSessionStore.open(host.data_dir / "plain.sqlite3")))


async def test_a_store_without_leases_drives_as_before_and_says_so_once(make_host, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="dsh")
    config = {"host": {"store": "plain"}}
    first = make_host(objects={"plain": PlainStores()}, config=config)
    second = make_host(objects={"plain": PlainStores()}, config=config)
    session_id = await stored_session(first, tmp_path)
    await stored_session(first, tmp_path)

    await first.sessions.resume(session_id)
    await second.sessions.resume(session_id)  # nothing keeps them apart, as before leases

    warnings = [r.getMessage() for r in caplog.records if "keeps no leases" in r.getMessage()]
    assert (
        warnings
        == ["the session store PlainStore keeps no leases: it cannot keep two hosts from driving one session at once"]
        * 2
    )  # once per host


# -- ids --------------------------------------------------------------------------------------------------


async def test_a_taken_id_is_not_available_whoever_holds_it(host_on, tmp_path):
    first, second = host_on(), host_on()
    session_id = await stored_session(first, tmp_path)
    live = first.sessions.create(str(tmp_path), "live-only")
    expected = 'session id "{}" is not available'
    for registry, taken in ((second.sessions, session_id), (first.sessions, live.id)):
        with pytest.raises(StoreError) as refused:
            registry.create(str(tmp_path), taken)
        assert str(refused.value) == expected.format(taken)
        with pytest.raises(StoreError) as refused_async:
            await registry.open_new(str(tmp_path), taken)
        assert str(refused_async.value) == expected.format(taken)


@pytest.fixture
def two_roles(postgres_server, postgres_database, make_host):
    """Hosts of two roles, alice's and bob's, on one PostgreSQL database."""

    def host_as(role: str) -> Host:
        dsn = postgres_database.dsn(postgres_server.role(role))
        return make_host(config={"host": {"store": "postgres"}, "stores": {"postgres": {"dsn": dsn}}})

    return host_as("alice"), host_as("bob")


async def test_another_roles_hidden_session_is_not_found_and_its_id_not_available(two_roles, tmp_path):
    alice, bob = two_roles
    session_id = await stored_session(alice, tmp_path)
    not_available = f'session id "{session_id}" is not available'
    for driven in (False, True):
        if driven:
            await alice.sessions.resume(session_id)
        # Visibility comes before the lease: never "being driven", whether alice drives it or not.
        with pytest.raises(SessionNotFound):
            await bob.open_agent(session_id)
        session = bob.sessions.create(str(tmp_path), session_id)
        session.append("session/title", {"title": "bob's"})
        with pytest.raises(StoreError) as refused:
            await bob.sessions.flush(session)
        assert str(refused.value) == not_available
        bob.sessions.forget(session_id)
    assert alice.store.read_title(session_id).title != "bob's"


# -- the command line ----------------------------------------------------------------------------------


@pytest.fixture
def driven(dsh_cli: DshRunner, make_host: HostFactory) -> tuple[DshRunner, Host, str]:
    """A session stored by `dsh run`, then driven mid-turn by a host of this process."""
    code, _, err = dsh_cli("run", "hello")
    assert code == 0, err
    session_id = err.splitlines()[-1].removeprefix("session: ")
    driver = make_host(data_dir=dsh_cli.home)
    asyncio.run(open_a_turn(driver, session_id))
    return dsh_cli, driver, session_id


def test_dsh_run_on_a_driven_session_exits_1_with_one_line(driven):
    dsh_cli, driver, session_id = driven
    _, before = driver.store.read_lines(session_id)
    assert dsh_cli("run", "--session", session_id, "me too") == (1, "", f"dsh: error: {busy(session_id)}\n")
    waited = dsh_cli("run", "--session", session_id, "--wait", "0.05", "me too")
    assert waited.exit_code == 1
    assert waited.stderr.splitlines() == [
        f"dsh: {busy(session_id)}; waiting up to 0.05 s",
        f"dsh: error: session {json.dumps(session_id)} is still being driven by another dsh after 0.05 s",
    ]
    assert driver.store.read_lines(session_id)[1] == before


def test_dsh_run_waits_only_for_a_session(dsh_cli):
    code, _, err = dsh_cli("run", "--wait", "5", "hello")
    assert (
        code == 2
        and err == "dsh: error: --wait needs --session: only an existing session can be driven by another dsh\n"
    )


def test_the_chat_does_not_open_a_driven_session(driven):
    dsh_cli, _, session_id = driven
    # The chat needs a terminal (without one it refuses before looking at the session): a real one.
    env = hermetic_env(dsh_cli.root, DSH_HOME=str(dsh_cli.home), DSH_LOAD_PLUGINS="", TERM="xterm")
    terminal = Terminal([*dsh_command(), "chat", "--session", session_id], cwd=dsh_cli.root, env=env)
    try:
        screen = terminal.wait_for("[dsh exited")
    finally:
        terminal.close()
    assert f"dsh: error: {busy(session_id)}\n[dsh exited 1]" in screen


def test_importing_over_a_driven_session_is_refused(driven, tmp_path):
    dsh_cli, _, session_id = driven
    exported = tmp_path / "exported.jsonl"
    assert dsh_cli("sessions", "export", session_id, "-o", str(exported)).exit_code == 0  # reading never waits
    assert dsh_cli("sessions", "import", "--replace", str(exported)) == (1, "", f"dsh: error: {busy(session_id)}\n")


def test_a_preview_composes_on_a_driven_session_without_repairing_it(driven):
    dsh_cli, driver, session_id = driven
    _, before = driver.store.read_lines(session_id)
    dsh_cli.plugins = ["session-reference"]
    code, out, err = dsh_cli("ref", "preview", "--target", session_id, "what now")
    assert (code, out, err) == (0, "content: what now\n", "")
    assert driver.store.read_lines(session_id)[1] == before  # still open: nothing repaired or written


def test_listing_showing_searching_and_referencing_a_driven_session_never_wait_for_it(driven):
    dsh_cli, driver, session_id = driven
    _, before = driver.store.read_lines(session_id)
    code, _, err = dsh_cli("run", "another session")
    assert code == 0, err
    other_id = err.splitlines()[-1].removeprefix("session: ")
    for command in (("sessions", "list"), ("sessions", "show", session_id), ("sessions", "search", "hello")):
        code, out, err = dsh_cli(*command)
        assert (code, err) == (0, ""), command
        assert session_id in out, command
    dsh_cli.plugins = ["session-reference"]
    code, mention, err = dsh_cli("ref", "mention", session_id)
    assert (code, err) == (0, "")
    code, out, err = dsh_cli("ref", "preview", "--json", "--target", other_id, f"see {mention.strip()}")
    assert (code, err) == (0, ""), err
    contexts = json.loads(out)["contexts"]
    assert [c["source"]["plugin"] for c in contexts] == ["session-reference"]
    assert f'"sessionId":"{session_id}"' in contexts[0]["content"][0]["text"]  # the driven session was read
    assert driver.store.read_lines(session_id)[1] == before


def test_compacting_a_driven_session_is_refused(driven):
    dsh_cli, _, session_id = driven
    dsh_cli.plugins = ["compact"]
    assert dsh_cli("compact", session_id) == (1, "", f"dsh: error: {busy(session_id)}\n")
