"""A `dsh web` process for a test: started on a data dir, its URL read, stopped by a signal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dsh_host.testing import private_homes

ROOT = Path(__file__).resolve().parents[2]
STOP_SECONDS = 10


@dataclass(frozen=True)
class Served:
    """A running `dsh web`: its process, the URL it printed, and that URL's origin."""

    process: subprocess.Popen[str]
    url: str

    @property
    def origin(self) -> str:
        match = re.match(r"http://[^/]+", self.url)
        assert match is not None
        return match.group()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` and wait for the exit code."""
        self.process.send_signal(sig)
        return self.process.wait(timeout=STOP_SECONDS)


def environment(data_dir: Path, root: Path) -> dict[str, str]:
    """The variables of a `dsh web` on `data_dir`, hermetic under `root`."""
    env = {key: value for key, value in os.environ.items() if key not in ("DSH_CONFIG", "DSH_SCRIPT")}
    env.update(
        {
            "DSH_HOME": str(data_dir),
            "DSH_LOAD_PLUGINS": "session-reference",
            "XDG_CONFIG_HOME": str(root / "user-config"),
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
    )
    env.update({key: value for key, value in private_homes(root / "user-home").items() if value is not None})
    return env


@contextmanager
def dsh_web(data_dir: Path, root: Path, *args: str) -> Iterator[Served]:
    """`dsh web --no-open --port 0 ARGS` on `data_dir`, until the block ends (then SIGTERM)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.web.serve", "--no-open", "--port", "0", *args],
        cwd=ROOT,
        env=environment(data_dir, root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"dsh web: serving on (http://\S+)\n", line)
        assert match is not None, (line, process.stderr.read() if process.poll() is not None else "")
        yield Served(process, match.group(1))
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=STOP_SECONDS)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
