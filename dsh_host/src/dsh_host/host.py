"""The host: configuration, plugin manager, services, and the shared runtime parts.

A host is built from a `Config`: it registers the host's own hook implementations
(`dsh_host.builtins`), discovers the installed plugins, imports and mounts the configured ones,
and exposes the store, the live sessions, the model registry and the service registry to them.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_host import builtins, plugins
from dsh_host.config import Config, default_data_dir, load_config
from dsh_host.query import SessionQuery
from dsh_host.services import Services

if TYPE_CHECKING:
    from dsh_host.models.registry import ModelRegistry
    from dsh_host.session.registry import SessionRegistry
    from dsh_host.store.sqlite import SqliteSessionStore


class Host:
    """A running dsh host. Build one with `Host.start(config)`; call `close()` when done."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pm = plugins.new_plugin_manager()
        self.pm.register(builtins, name="dsh-host")
        self.services = Services()
        self.installed = plugins.discover()
        self.mounted: list[plugins.MountedPlugin] = []
        self._modules: dict[str, Any] = {}
        self._closed = False

    @classmethod
    def start(cls, config: Config | None = None) -> Host:
        """Mount the configured plugins; raises PluginError (nothing stays mounted) on failure."""
        host = cls(config if config is not None else load_config())
        host.services.register("session_query", SessionQuery(host), owner="dsh-host")
        names = plugins.resolve_names(host.config.plugin_names, host.installed)
        modules = plugins.import_plugins(names, host.installed)
        host.mounted = plugins.mount_all(host, names, modules)
        host._modules = modules
        return host

    @property
    def hook(self) -> Any:
        """The pluggy hook relay (`host.hook.dsh_agent_post_step(...)`)."""
        return self.pm.hook

    @cached_property
    def data_dir(self) -> Path:
        configured = self.config.host.get("data_dir")
        return Path(configured).expanduser() if configured else default_data_dir()

    @cached_property
    def store(self) -> SqliteSessionStore:
        """The embedded SQLite store, opened on first use."""
        from dsh_host.store.sqlite import SqliteSessionStore

        return SqliteSessionStore.open(self.data_dir / "sessions.sqlite3")

    @cached_property
    def sessions(self) -> SessionRegistry:
        """Live sessions of this process, persisted through `store`."""
        from dsh_host.session.registry import SessionRegistry

        return SessionRegistry(self)

    @cached_property
    def models(self) -> ModelRegistry:
        from dsh_host.models.registry import ModelRegistry

        return ModelRegistry.from_hooks(self)

    def close(self) -> None:
        """Unmount plugins in reverse order and close the store."""
        if self._closed:
            return
        self._closed = True
        plugins.unmount_all(self, [(p.name, self._modules[p.name]) for p in self.mounted])
        self.mounted = []
        if "store" in self.__dict__:
            self.store.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
