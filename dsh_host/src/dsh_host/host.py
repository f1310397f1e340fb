"""The host: configuration, plugin manager, services, and the shared runtime parts.

A host is built from a `Config`: it registers the host's own hook implementations
(`dsh_host.builtins`), discovers the installed plugins, imports and mounts the configured ones
(then any plugin objects handed to `Host.start`), and exposes the store, the live sessions, the
model registry and the service registry to them.

Each of those parts is imported when first used, so a command that only reads the store loads
neither the agent, the model adapters nor asyncio.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_host import plugins as loading
from dsh_host.config import Config, default_data_dir, load_config
from dsh_host.errors import PluginError
from dsh_host.files import withdraw_exposure
from dsh_host.services import Services

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.agent.agent import Agent
    from dsh_host.live_sessions import SessionRegistry
    from dsh_host.models.registry import ModelRegistry
    from dsh_host.query import SessionQuery
    from dsh_host.sources.registry import SessionSources
    from dsh_host.store.base import SessionStore

HOST_PLUGIN = "dsh-host"
BUILTIN_PLUGINS = ("dsh_host.builtins",)
"""The host's own hook implementations, imported by name (as pytest imports its default plugins),
so the host core does not import the commands and terminal UI they register."""


class Host:
    """A running dsh host. Build one with `Host.start(config)`; close it when done.

    `Host` is a context manager (`with Host.start(config) as host:`) and an async one
    (`async with Host.start(config) as host:`, which also flushes live sessions on exit).
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pm = loading.new_plugin_manager()
        for module in BUILTIN_PLUGINS:
            self.pm.register(importlib.import_module(module), name=HOST_PLUGIN)
        self.services = Services()
        self.installed = loading.discover()
        self.mounted: list[loading.MountedPlugin] = []
        self._plugin_objects: dict[str, object] = {}
        self._store_lock = threading.Lock()
        self._closed = False

    @classmethod
    def start(
        cls,
        config: Config | None = None,
        *,
        plugins: Mapping[str, object] | None = None,
        session_query: bool = True,
    ) -> Host:
        """Mount the configured plugins, then `plugins` (name to plugin object), in order.

        A plugin object (a module, class or instance with `dsh_*` hook implementations) is
        registered and mounted exactly like an installed plugin of that name, with its
        `[plugins.<name>]` table, so a custom host needs no entry points. Raises PluginError
        (nothing stays mounted) on failure.

        `session_query=False` composes a host without the `session_query` service (nothing on
        it can read other sessions; a plugin that needs the service fails to mount), as the
        automation-only ACP transport does.
        """
        host = cls(config if config is not None else load_config())
        if session_query:
            host.services.register_factory("session_query", host._make_session_query, owner=HOST_PLUGIN)
        names = loading.resolve_names(host.config.plugin_names, host.installed, host.config.store_name)
        objects = loading.import_plugins(names, host.installed)
        for name, plugin in (plugins or {}).items():
            if name in objects:
                raise PluginError(f"plugin {name!r} is both configured and given to Host.start")
            objects[name] = plugin
        host.mounted = loading.mount_all(host, list(objects), objects)
        host._plugin_objects = objects
        return host

    @property
    def hook(self) -> HookRelay:
        """The pluggy hook relay (`host.hook.dsh_agent_post_step(...)`)."""
        return self.pm.hook

    @cached_property
    def data_dir(self) -> Path:
        """Where the host keeps its data (`[host] data_dir`, else the platform's user data dir).

        The default folder is dsh's own: when it exists with permissions for anyone but its
        owner (made by an older dsh, or by hand), they are taken away here. A configured folder
        may be shared on purpose; `dsh sessions check` reports it instead.
        """
        configured = self.config.host.get("data_dir")
        if configured:
            return Path(configured).expanduser()
        default = default_data_dir()
        with contextlib.suppress(FileNotFoundError, PermissionError):  # not made yet, or not ours to change
            withdraw_exposure(default)
        return default

    @cached_property
    def store(self) -> SessionStore:
        """The configured store (`[host] store`, default `sqlite`), opened on first use.

        Its operations block: call them from a worker thread (`asyncio.to_thread`), as the
        session registry and the query service do.
        """
        from dsh_host.store.registry import open_store

        return open_store(self, self.config.store_name, self.config.store_table(self.config.store_name))

    def _store_now(self) -> SessionStore:
        # Worker threads may ask for the store at once: open it once.
        if "store" not in self.__dict__:
            with self._store_lock:
                return self.store
        return self.store

    def _make_session_query(self) -> SessionQuery:
        # Built when first asked for: a command that reads no session never loads the query side.
        from dsh_host.query import SessionQuery

        return SessionQuery(self._registry_if_made, self._store_now, lambda: self.sources)

    def _registry_if_made(self) -> SessionRegistry | None:
        # What the query service reads live sessions from: a host that opened none has no
        # registry, and a command that only reads the store never makes (or imports) one.
        return self.__dict__.get("sessions")

    @cached_property
    def sessions(self) -> SessionRegistry:
        """Live sessions of this process, persisted through `store` (never a source's: those are read-only)."""
        from dsh_host.live_sessions import SessionRegistry

        return SessionRegistry(self._store_now, read_only=lambda session_id: self.sources.refuse_write(session_id))

    @cached_property
    def sources(self) -> SessionSources:
        """The session sources the mounted plugins register (`dsh_register_session_sources`).

        Each opens on first use; `sources.owner(id)` names the one serving a session id.
        """
        from dsh_host.sources.registry import SessionSources, source_factories

        return SessionSources(self, source_factories(self.hook), self.config.source_table)

    @cached_property
    def models(self) -> ModelRegistry:
        """Model adapters by provider (`host.models.resolve("openai:deepseek-chat")`)."""
        from dsh_host.models.registry import ModelRegistry

        return ModelRegistry.from_hooks(self)

    async def open_agent(
        self,
        session_id: str | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        model: str | None = None,
        wait: float = 0.0,
        read_only: bool = False,
    ) -> Agent:
        """An agent on a new session (in `cwd`, default the process's) or on session `session_id`.

        Driving a session takes its lease, which this host holds until the last of its agents
        on the session closes (`await agent.close()`), `await host.sessions.release(id)`, or the
        host closes: meanwhile another host can neither resume nor write it. An existing
        session is resumed under its lease (a turn a crash left open is closed first);
        `SessionBusy` when another host drives it for longer than `wait` seconds (at once by
        default). `read_only=True` drives nothing: the agent works on a copy of the stored
        session, taking no lease and repairing nothing, to `compose` what a message would send
        (a turn it ran could not be written). `model` is a `provider[:model]` spec (default
        `[host] model`).
        """
        from dsh_host.agent.agent import Agent

        resolved = self.models.resolve(model)
        if read_only:
            if session_id is None:
                raise ValueError("read_only=True needs the session_id of a stored session")
            session = await self.sessions.load(session_id)
        elif session_id is None:
            session = await self.sessions.open_new(os.fspath(cwd) if cwd is not None else os.getcwd())
        else:
            session = await self.sessions.resume(session_id, wait=wait)
        return Agent.create(self, session, resolved)

    def close(self) -> None:
        """Unmount plugins in reverse order, give up every lease and close the store (live sessions are not flushed)."""
        if self._closed:
            return
        self._closed = True
        loading.unmount_all(self, [(p.name, self._plugin_objects[p.name]) for p in self.mounted])
        self.mounted = []
        if "sessions" in self.__dict__:
            self.sessions.release_leases()
        if "sources" in self.__dict__:
            self.sources.close()
        if "store" in self.__dict__:
            self.store.close()

    async def aclose(self) -> None:
        """Flush every live session (off the event loop), then `close()`."""
        import asyncio

        if not self._closed and "sessions" in self.__dict__:
            await self.sessions.close()
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
