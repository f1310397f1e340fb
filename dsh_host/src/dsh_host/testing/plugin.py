"""The pytest plugin (entry point `pytest11`): fixtures over `dsh_host.testing`'s helpers.

pytest loads this module itself when dsh-host is installed; nothing else imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsh_host import Host
from dsh_host.testing.cli import DshRunner
from dsh_host.testing.homes import private_homes
from dsh_host.testing.hosts import HostFactory
from dsh_host.testing.logs import LogBuilder
from dsh_host.testing.postgres import DSN_VARIABLE, Database, PostgresServer
from dsh_host.testing.requests import sent_requests as _sent_requests

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue


@pytest.fixture
def make_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostFactory]:
    """Start hosts on a data dir in `tmp_path`; all of them are closed at teardown.

    `make_host(plugins=["compact"], objects={"mine": Mine()}, script=[{"text": "hi"}],
    compact={"auto": False})` returns a started `Host` (see `HostFactory.__call__`). Hosts made
    by one test share the data dir unless given their own `data_dir`, so a second host sees what
    the first stored. `HOME` and the agents' homes point into `tmp_path` for the test
    (`private_homes`), so a mounted source never reads the machine's real sessions.
    """
    for variable, value in private_homes(tmp_path / "user-home").items():
        monkeypatch.setenv(variable, value)
    factory = HostFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def dsh_host(make_host: HostFactory) -> Host:
    """A started host with no plugins (only the host's own hooks), its data dir in `tmp_path`."""
    return make_host()


@pytest.fixture
def dsh_cli(tmp_path: Path) -> DshRunner:
    """Run `dsh ...` in-process: `dsh_cli("sessions", "list")` returns `(exit_code, stdout, stderr)`.

    The environment is hermetic: `DSH_HOME` is `dsh_cli.home` (in `tmp_path`), no plugin is
    mounted unless `dsh_cli.plugins` names some, no `DSH_CONFIG`, `DSH_SCRIPT` or user
    configuration applies, and commands run in `tmp_path`.
    """
    return DshRunner(tmp_path)


@pytest.fixture(name="sent_requests")
def sent_requests_fixture() -> Callable[[Host], list[dict[str, JsonValue]]]:
    """`sent_requests(host)`: the model requests the host's scripted model received, in order.

    Each is plain JSON in the shape `dsh_host.log.rebuild_request` gives, so a test can compare
    what was sent with what the session's log implies (see `dsh_host.testing.sent_requests`).
    """
    return _sent_requests


@pytest.fixture(scope="session")
def log_builder() -> type[LogBuilder]:
    """Builders for hand-written session logs (see `LogBuilder`)."""
    return LogBuilder


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """The PostgreSQL server `DSH_TEST_POSTGRES_DSN` names (a superuser DSN; see `PostgresServer`).

    Without the variable the test skips saying how to get a server, or fails when `CI` is set.
    Login roles it makes authenticate through a pgpass file (`PGPASSFILE`; `PGPASSWORD` unset).
    Everything it created is dropped at the end of the session.
    """
    dsn = os.environ.get(DSN_VARIABLE)
    if not dsn:
        reason = f'no PostgreSQL server: set {DSN_VARIABLE} (eval "$(.ci/postgres start DIR)" starts one)'
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must provide one")
        pytest.skip(reason)
    pgpass = tmp_path_factory.mktemp("pgpass") / "pgpass"
    pgpass.touch(mode=0o600)
    server = PostgresServer(dsn, pgpass)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PGPASSFILE", str(pgpass))
        mp.delenv("PGPASSWORD", raising=False)
        yield server
        server.cleanup()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[Database]:
    """A fresh database with the dsh schema, owned by its own role, with an ordinary login role
    `user` to open stores as (`database.open()`, `database.dsn(role)`); dropped afterwards."""
    database = postgres_server.database()
    yield database
    postgres_server.drop(database.name)
