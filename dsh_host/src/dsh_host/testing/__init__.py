"""Test helpers for people who write dsh plugins and hosts, and the pytest plugin that offers them.

Installing `dsh-host` registers `dsh_host.testing.plugin` under pytest's `pytest11` entry point,
so in any project that has dsh-host installed these fixtures are available without a conftest:

- `make_host`: start hosts on a temporary data dir, with chosen plugins (installed ones by name,
  plugin objects by name) and a scripted model; every host is closed at teardown
  (`HostFactory`).
- `dsh_host`: one such host with no plugins.
- `dsh_cli`: run the `dsh` command line in-process in a hermetic environment (`DshRunner`).
- `log_builder`: events in session-log form for hand-written logs (`LogBuilder`).
- `sent_requests`: `sent_requests(host)`, the model requests a host's scripted model received,
  in the shape `dsh_host.log.rebuild_request` gives.
- `RecordingUI(agent)`: run slash commands as the terminal UI does, recording what they show.
- `postgres_server`, `postgres_database`: a PostgreSQL server (`DSH_TEST_POSTGRES_DSN`) and a
  fresh database with the dsh schema on it (`PostgresServer`, `Database`; needs
  `dsh-host[postgres]`).

- `appended(session, predicate)`: wait for the event a test needs, not for event-loop ticks.
- `private_homes(root)`: `HOME` and the agents' home variables pointing under `root`, so that
  nothing reads the machine's real sessions of other agents (`make_host` and `dsh_cli` use it).

The helpers themselves import nothing of pytest, so they can also be used outside it.
"""

from dsh_host.testing.cli import CliResult, DshRunner
from dsh_host.testing.homes import AGENT_HOME_VARIABLES, private_homes
from dsh_host.testing.hosts import HostFactory
from dsh_host.testing.logs import LogBuilder
from dsh_host.testing.postgres import Database, PostgresServer
from dsh_host.testing.requests import sent_requests
from dsh_host.testing.ui import RecordingUI
from dsh_host.testing.waits import appended

__all__ = [
    "AGENT_HOME_VARIABLES",
    "CliResult",
    "Database",
    "DshRunner",
    "HostFactory",
    "LogBuilder",
    "PostgresServer",
    "RecordingUI",
    "appended",
    "private_homes",
    "sent_requests",
]
