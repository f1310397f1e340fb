"""Hosts for session-reference tests (a helper module, not a test module)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_host.config import load_config
from dsh_host.host import Host


def start_host(home: Path, **table: Any) -> Host:
    """A host mounting only session-reference, with `[plugins.session-reference]` = `table`."""
    explicit = None
    if table:
        lines = ["[plugins.session-reference]", *(f"{key} = {value}" for key, value in table.items())]
        explicit = home / "table.toml"  # not ./dsh.toml: a later host without a table must not find it
        explicit.write_text("\n".join(lines) + "\n")
    env = {"DSH_HOME": str(home / "data"), "DSH_LOAD_PLUGINS": "session-reference"}
    return Host.start(load_config(explicit, env=env, cwd=home))
