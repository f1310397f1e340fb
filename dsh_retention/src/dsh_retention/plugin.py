"""The `retention` plugin: mounts the retention library as the host service `retention`.

A host imports this module through the `dsh` entry point; `import dsh_retention` alone never
needs pluggy or the host. The service is built when first asked for, so mounting the plugin
(every `dsh` command does) loads none of the library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    # For the type checker only: dsh-retention declares no dependency on dsh-host.
    from dsh_host import Host

    from .service import RetentionService

# Made here rather than imported from dsh_host, for the same reason.
hookimpl = pluggy.HookimplMarker("dsh")


@hookimpl
def dsh_mount(host: Host, config: Mapping[str, Any]) -> None:
    """Register the `retention` service; the plugin takes no settings, so any key is a `ConfigError`."""
    if config:
        # Imported here, not at the top: only a running host calls this hook, so dsh_host is
        # imported by then, though dsh-retention does not declare it.
        from dsh_host import ConfigError

        key = next(iter(config))
        raise ConfigError(f"[plugins.retention] unknown key {key!r}")
    host.services.register_factory("retention", _service)


def _service() -> RetentionService:
    from .service import RetentionService

    return RetentionService()
