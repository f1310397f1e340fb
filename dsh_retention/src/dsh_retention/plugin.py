"""The `retention` plugin: mounts the retention library as the host service `retention`.

A host imports this module through the `dsh` entry point; `import dsh_retention` alone never
needs pluggy or the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import pluggy

from .service import RetentionService

# Made here rather than imported from dsh_host: dsh-retention declares no dependency on dsh-host.
hookimpl = pluggy.HookimplMarker("dsh")


class _Services(Protocol):
    def register(self, name: str, service: object) -> None: ...


class _Host(Protocol):
    @property
    def services(self) -> _Services: ...


@hookimpl
def dsh_mount(host: _Host, config: Mapping[str, object]) -> None:
    """Register the `retention` service; the plugin takes no settings, so any key is a `ConfigError`."""
    if config:
        # Imported here, not at the top: only a running host calls this hook, so dsh_host is
        # imported by then, though dsh-retention does not declare it.
        from dsh_host import ConfigError

        key = next(iter(config))
        raise ConfigError(f"[plugins.retention] unknown key {key!r}")
    host.services.register("retention", RetentionService())
