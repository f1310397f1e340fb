"""Running `dsh` as a process in a hermetic environment, and reading the JSON-RPC frames it writes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dsh_host.testing import private_homes


def write_script(directory: Path, entries: Sequence[Any]) -> Path:
    """A scripted-model script file (JSON) under `directory`."""
    path = directory / "script.json"
    path.write_text(json.dumps(list(entries)), encoding="utf-8")
    return path


def dsh_command() -> list[str]:
    """`dsh` as installed beside this interpreter."""
    return [str(Path(sys.executable).with_name("dsh"))]


def hermetic_env(tmp_path: Path, entries: Sequence[Any] | None = None, **extra: str) -> dict[str, str]:
    """An environment for a `dsh` process (and a client that starts one) that keeps all under `tmp_path`.

    `DSH_HOME` is `tmp_path/dsh` unless `extra` sets it; `entries` are the scripted model's script.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        private_homes(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        DSH_HOME=str(tmp_path / "dsh"),
    )
    if entries is not None:
        env["DSH_SCRIPT"] = str(write_script(tmp_path, entries))
    env.update(extra)
    return env


def frames_of(text: str) -> Iterator[dict[str, Any]]:
    """Every line of `text` as a JSON-RPC 2.0 frame; fails on a line that is not one."""
    for line in text.splitlines():
        frame = json.loads(line)
        assert frame.get("jsonrpc") == "2.0", line
        assert "method" in frame or "result" in frame or "error" in frame, line
        yield frame
