"""What `dsh` does to start: each command imports what it runs, never a library it does not use,
and the program keeps the garbage collector off what start-up made.

Pinned by the modules a command leaves loaded, not by time (`python -m bench startup` times
start-up). Each command runs in a fresh interpreter the way the console script runs it, with
the standard installed plugins mounted, and reports `sys.modules` when it returns.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from dsh_host import Host
from dsh_host.testing import DshRunner

HEAVY = ("rich", "prompt_toolkit", "httpx", "psycopg", "acp", "mcp", "starlette", "uvicorn", "jinja2", "markdown_it")
"""The terminal UI's libraries, the model adapters' HTTP client, the PostgreSQL driver, the
protocol SDKs and the web view's server and templates: none is needed to print the version,
list sessions or write a mention."""

MARK = "--- loaded modules ---"
PROBE = (
    "import sys\n"
    "from dsh_host.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    f"print({MARK!r})\n"
    "print('\\n'.join(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)


def _run(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """`dsh ARGS` in a fresh interpreter: what it printed, and the modules it left loaded."""
    home = tmp_path / "home"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DSH_", "XDG_"))}
    # The data dir is the one `make_host` hosts share.
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), DSH_HOME=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    output, _, modules = done.stdout.partition(MARK + "\n")
    return output, set(modules.split())


def _loaded(modules: set[str], *prefixes: str) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in prefixes or m.startswith(tuple(p + "." for p in prefixes)))


def test_version_loads_neither_the_host_nor_plugin_discovery(tmp_path):
    output, modules = _run(tmp_path, "--version")

    assert output.startswith("dsh ")
    assert _loaded(modules, *HEAVY) == []
    assert _loaded(modules, "asyncio", "dsh_host.agent", "dsh_host.host", "dsh_host.config") == []
    assert "importlib.metadata" not in modules


async def test_listing_sessions_reads_the_store_without_ui_event_loop_network_or_other_drivers(
    dsh_host: Host, tmp_path: Path
) -> None:
    agent = await dsh_host.open_agent(cwd=tmp_path)
    await agent.submit("hello")
    await agent.close()

    output, modules = _run(tmp_path, "sessions", "list")

    assert output.startswith(f"{agent.session.id}  ")
    # The standard plugins are mounted (they register commands and services) ...
    assert {"dsh_compact.plugin", "dsh_session_reference.plugin", "dsh_retention.plugin"} <= modules
    # ... yet none of what listing does not use is loaded: the store is read synchronously.
    assert _loaded(modules, *HEAVY) == []
    assert _loaded(modules, "asyncio", "dsh_host.agent", "dsh_host.models", "dsh_host.tui") == []


def test_a_labelled_mention_opens_no_store(tmp_path):
    output, modules = _run(tmp_path, "ref", "mention", "some-session", "--label", "some-session")

    assert output.strip() == "@[some-session](dsh-session:InNvbWUtc2Vzc2lvbiI)"
    assert _loaded(modules, *HEAVY) == []
    assert _loaded(modules, "asyncio", "sqlite3", "dsh_host.store", "dsh_host.query", "dsh_host.agent") == []


def test_the_program_freezes_what_start_up_made_and_collects_as_usual_afterwards(tmp_path):
    probe = (
        "import gc, sys\n"
        "from dsh_host.cli.main import main\n"
        "sys.argv = ['dsh', 'plugins']\n"
        "code = main()\n"
        "print(code, gc.get_freeze_count() > 0, gc.isenabled())\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DSH_", "XDG_"))}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), DSH_HOME=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True)

    assert done.stdout.split()[-3:] == ["0", "True", "True"], done.stderr


def test_main_given_arguments_leaves_the_collector_alone(dsh_cli: DshRunner):
    # A process that goes on after the command (a test, a host embedding it) keeps its garbage
    # collectable: nothing is frozen.
    frozen = gc.get_freeze_count()

    assert dsh_cli("plugins").exit_code == 0
    assert gc.get_freeze_count() == frozen and gc.isenabled()
