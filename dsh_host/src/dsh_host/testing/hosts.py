"""`HostFactory`: hosts on a temporary data dir, with chosen plugins and a scripted model."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_host import Config, Host

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json


class HostFactory:
    """Starts hosts whose data lives under `root`, and closes every one of them at `close()`.

    Configuration is built in code (`Config.from_mapping`), so no configuration file, user
    configuration or `DSH_*` variable reaches the hosts. `HOME` and the agents' homes come from
    the process's environment (a mounted source reads the agents' files there): the `make_host`
    fixture points them into the test's temp dir; elsewhere set them with `private_homes`.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.data_dir = self.root / "data"
        """The data dir hosts share unless given their own."""
        self.hosts: list[Host] = []

    def __call__(
        self,
        plugins: Sequence[str] = (),
        *,
        objects: Mapping[str, object] | None = None,
        script: Sequence[Json] | None = None,
        config: Mapping[str, Any] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        **tables: Mapping[str, Any],
    ) -> Host:
        """A started host.

        - `plugins`: installed plugins to mount by name, in order (`[host] plugins`).
        - `objects`: plugin objects by name, mounted after them (`Host.start(plugins=...)`).
        - `script`: the scripted model's entries, in the script-file format (`{"text": "hi"}`,
          `{"tool_call": {"id", "name", "arguments"}}`, `{"hang": true}`, `{"error": {...}}`,
          `{"chunks": [...]}`), one per model request; without it the scripted model answers
          every request deterministically.
        - `config`: more configuration in `dsh.toml` shape, merged over the above
          (`{"host": {"store": "postgres"}, "stores": {...}}`).
        - `data_dir`: this host's own data dir instead of the shared `self.data_dir`.
        - `**tables`: `[plugins.<name>]` tables by plugin name, `_` standing for `-`
          (`session_reference={"max_references": 2}`).
        """
        mapping: dict[str, Any] = {
            "host": {"plugins": list(plugins), "data_dir": str(data_dir if data_dir is not None else self.data_dir)},
            "plugins": {name.replace("_", "-"): dict(table) for name, table in tables.items()},
        }
        if script is not None:
            mapping["models"] = {"scripted": {"script": str(self._write_script(script))}}
        for section, table in (config or {}).items():
            mapping.setdefault(section, {})
            for key, value in table.items():
                old = mapping[section].get(key)
                mapping[section][key] = {**old, **value} if isinstance(old, dict) else copy.deepcopy(value)
        host = Host.start(Config.from_mapping(mapping), plugins=objects)
        self.hosts.append(host)
        return host

    def close(self) -> None:
        """Close every host this factory started (closing twice is harmless)."""
        for host in reversed(self.hosts):
            host.close()

    def _write_script(self, script: Sequence[Json]) -> Path:
        path = self.root / f"script-{len(self.hosts)}.json"
        path.write_text(json.dumps(list(script)), encoding="utf-8")
        return path
