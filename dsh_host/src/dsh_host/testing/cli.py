"""`DshRunner`: the `dsh` command line run in-process, in a hermetic environment."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from click.testing import CliRunner

from dsh_host.testing.homes import private_homes


class CliResult(NamedTuple):
    """What one `dsh` invocation did; compares and unpacks as `(exit_code, stdout, stderr)`."""

    exit_code: int
    stdout: str
    stderr: str


class DshRunner:
    """Runs `dsh_host.cli.main` under click's `CliRunner`, with its own data and config dirs.

    Each call sets `DSH_HOME` to `home` and `DSH_LOAD_PLUGINS` to `plugins` (none by default;
    None leaves the variable unset, so the configured or default plugins mount), unsets
    `DSH_CONFIG` and `DSH_SCRIPT`, points the user configuration dir into `root` (so a
    developer's own `dsh.toml` never applies) and `HOME` and the agents' homes there too
    (`private_homes(root / "user-home")`: no command reads the machine's real sessions), and
    runs in `cwd`; `env` adds or overrides variables (`None` unsets one). Change `plugins`,
    `env` and `cwd` between calls as needed.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        plugins: Sequence[str] | None = (),
        env: Mapping[str, str | None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.home = self.root / "home"
        """The data dir (`DSH_HOME`) of every command."""
        self.cwd = self.root
        self.plugins: list[str] | None = None if plugins is None else list(plugins)
        self.env: dict[str, str | None] = dict(env or {})

    def environment(self) -> dict[str, str | None]:
        """The variables a command runs with (on top of the process's own)."""
        return {
            "DSH_HOME": str(self.home),
            "DSH_LOAD_PLUGINS": None if self.plugins is None else ",".join(self.plugins),
            "DSH_CONFIG": None,
            "DSH_SCRIPT": None,
            "XDG_CONFIG_HOME": str(self.root / "user-config"),
            **private_homes(self.root / "user-home"),
            **self.env,
        }

    def __call__(self, *args: str, input: str | bytes | None = None) -> CliResult:
        """Run `dsh *args` (with `input` on stdin); returns its exit code, stdout and stderr."""
        # The command line (and the UI it can open) loads only for tests that run it.
        from dsh_host.cli.main import main

        runner = CliRunner()
        with _working_dir(self.cwd), runner.isolation(input=input, env=self.environment()) as (out, err, _):
            code = main(list(args))
        return CliResult(code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8"))


@contextlib.contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    # contextlib.chdir is Python 3.11+.
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)
