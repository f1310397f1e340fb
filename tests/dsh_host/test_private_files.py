"""Private by default: every folder dsh makes is 0700 and every file 0600, whatever the umask.

The store's database and the -wal and -shm files SQLite makes beside it, the lease folder and
its lock files, the data dir and the folders above it that dsh had to make; an existing default
data dir that others may read is made private, a configured one is reported by `dsh sessions check`.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_host.files import exposed_bits, private_file, private_folder, withdraw_exposure
from tests.processes import dsh_command, hermetic_env

# Run in a process of its own, so that its umask is that process's alone: it drives a session
# (a lease held, a turn written) and reports the modes of what is on disk while the store is open.
DRIVE_A_SESSION = r"""
import asyncio, json, os, sys
from pathlib import Path
from dsh_host import Config, Host

os.umask(int(sys.argv[1], 8))
data = Path(sys.argv[2])

async def main():
    config = Config.from_mapping({"host": {"plugins": [], "data_dir": str(data)}})
    async with Host.start(config) as host:
        agent = await host.open_agent(cwd=str(data.parent))
        await agent.send("hello").result()
        modes = {}
        for path in [data.parent.parent, data.parent, *sorted(data.rglob("*")), data]:
            modes[str(path.relative_to(data.parent.parent))] = oct(os.stat(path).st_mode & 0o777)
        print(json.dumps(modes))
        await agent.close()

asyncio.run(main())
"""


@pytest.fixture
def umask() -> Iterator[None]:
    """Lets a test set the process's umask, restoring it after."""
    previous = os.umask(0o022)
    os.umask(previous)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", ["000", "022", "277"])  # 277 takes the owner's own write bit
def test_what_a_driven_session_leaves_on_disk_is_private(tmp_path: Path, mask: str) -> None:
    data = tmp_path / "made" / "by-dsh" / "data"
    done = subprocess.run(
        [sys.executable, "-c", DRIVE_A_SESSION, mask, str(data)],
        capture_output=True,
        text=True,
        env=hermetic_env(tmp_path),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    modes = json.loads(done.stdout)
    files = {"by-dsh/data/sessions.sqlite3", "by-dsh/data/sessions.sqlite3-wal", "by-dsh/data/sessions.sqlite3-shm"}
    assert files <= set(modes), modes  # the store is open: SQLite's journal files are there
    assert any(name.endswith(".lock") for name in modes), modes  # and so is the session's lease
    for name, found in modes.items():
        wanted = "0o700" if (tmp_path / "made" / name).is_dir() else "0o600"
        assert found == wanted, f"{name} is {found} under umask {mask}"


@pytest.mark.parametrize("mask", ["000", "022"])
def test_dsh_run_makes_its_data_dir_and_the_folders_above_it_private(tmp_path: Path, mask: str) -> None:
    data = tmp_path / "a" / "b" / "data"
    env = hermetic_env(tmp_path, DSH_HOME=str(data), DSH_LOAD_PLUGINS="")
    done = subprocess.run(
        ["sh", "-c", f'umask {mask} && exec "$@"', "sh", *dsh_command(), "run", "hi"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for folder in (tmp_path / "a", tmp_path / "a" / "b", data, data / "sessions.sqlite3-leases"):
        assert mode(folder) == 0o700, folder
    assert mode(data / "sessions.sqlite3") == 0o600


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o277])
def test_the_helpers_set_the_modes_whatever_the_umask(tmp_path: Path, umask: None, mask: int) -> None:
    os.umask(mask)
    folder = private_folder(tmp_path / "x" / "y")
    assert mode(tmp_path / "x") == mode(folder) == 0o700
    assert private_file(folder / "index.sqlite3")
    assert mode(folder / "index.sqlite3") == 0o600
    assert not private_file(folder / "index.sqlite3")  # there already: left as it is


def test_an_existing_folder_keeps_its_mode_and_is_reported(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o750)
    assert private_folder(shared) == shared and mode(shared) == 0o750
    assert exposed_bits(shared) == 0o050
    assert withdraw_exposure(shared) and mode(shared) == 0o700
    assert not withdraw_exposure(shared)
    assert exposed_bits(tmp_path / "absent") == 0


def test_the_default_data_dir_others_may_read_is_made_private(tmp_path: Path) -> None:
    env = hermetic_env(tmp_path, DSH_LOAD_PLUGINS="")
    del env["DSH_HOME"]
    default = Path(env["XDG_DATA_HOME"]) / "dsh"  # the platform's user data dir on Linux
    default.mkdir(parents=True)
    default.chmod(0o755)
    done = subprocess.run([*dsh_command(), "sessions", "list"], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert mode(default) == 0o700
    assert mode(default / "sessions.sqlite3") == 0o600


def test_sessions_check_reports_a_configured_data_dir_others_may_read(dsh_cli, tmp_path: Path) -> None:
    code, out, err = dsh_cli("sessions", "list")
    assert code == 0, err
    dsh_cli.home.chmod(0o755)
    (dsh_cli.home / "notes.txt").write_text("kept by hand")
    (dsh_cli.home / "notes.txt").chmod(0o640)
    code, out, err = dsh_cli("sessions", "check")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"private  {dsh_cli.home}  mode 0755: other users may read it (chmod go-rwx {dsh_cli.home})",
        f"private  {dsh_cli.home / 'notes.txt'}  mode 0640: the group may read it"
        f" (chmod go-rwx {dsh_cli.home / 'notes.txt'})",
    ]
    assert mode(dsh_cli.home) == 0o755  # a configured folder may be shared on purpose: reported, not changed
    code, out, _ = dsh_cli("sessions", "check", "--json")
    assert json.loads(out.splitlines()[0]) == {"private": False, "path": str(dsh_cli.home), "mode": "0755"}
