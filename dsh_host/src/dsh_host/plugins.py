"""Plugin discovery and mounting.

Every installed entry point in group `dsh` is discovered (so `dsh plugins` can list it). With no
`[host] plugins` list (nor `DSH_LOAD_PLUGINS`) every installed plugin is mounted but stores
(`store-<name>`, mounted when `[host] store` chooses it) and those `[host] disable` names; a
list mounts exactly what it names, in order. Importing all of them happens before any mount,
and a failing mount unmounts what was mounted before it, so start-up either mounts every
plugin it should or none.

The entry points of group `dsh.commands` say which plugin adds which command without importing
it: each is named after a command and points at the module of the plugin that adds it (the
value of the plugin's own entry point). A command of an installed plugin that is not mounted
then gets one line saying what would mount it (`unmounted_command`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Protocol

import pluggy

from dsh_host import hookspecs
from dsh_host.config import DEFAULT_PLUGINS
from dsh_host.errors import DshError, PluginError

if TYPE_CHECKING:
    from dsh_host.config import Config
    from dsh_host.services import Services


class PluginHost(Protocol):
    """What mounting uses of a host (a `dsh_host.Host` is one)."""

    @property
    def pm(self) -> pluggy.PluginManager: ...

    services: Services
    config: Config

    @property
    def installed(self) -> Mapping[str, InstalledPlugin]: ...


GROUP = "dsh"
COMMANDS_GROUP = "dsh.commands"
"""Entry points naming the commands a plugin adds: `<command> = "<the plugin's module>"`."""
STORE_PREFIX = "store-"
"""The name of a store's plugin is `store-<store>`: mounted exactly when that store is used."""

log = logging.getLogger("dsh.plugins")


@dataclass(frozen=True)
class InstalledPlugin:
    """An entry point in group `dsh`, not necessarily imported.

    Its distribution's name and version are read from the distribution's metadata when asked
    (`dsh plugins` asks; starting a host does not).
    """

    name: str
    module: str
    entry_point: metadata.EntryPoint = field(repr=False, compare=False)

    @property
    def distribution(self) -> str | None:
        dist = self._dist
        return dist.metadata["Name"] if dist is not None else None

    @property
    def version(self) -> str | None:
        dist = self._dist
        return dist.version if dist is not None else None

    @property
    def _dist(self) -> metadata.Distribution | None:
        return self.entry_point.dist

    def load(self) -> object:
        """Import the plugin's module (or object) as its entry point names it."""
        return self.entry_point.load()


@dataclass(frozen=True)
class MountedPlugin:
    """A plugin the host mounted, with the hooks it implements."""

    name: str
    module: str
    hooks: tuple[str, ...] = field(default_factory=tuple)
    installed: InstalledPlugin | None = field(default=None, repr=False, compare=False)
    """The installed plugin it came from (None for a plugin object handed to `Host.start`)."""

    @property
    def distribution(self) -> str | None:
        return self.installed.distribution if self.installed is not None else None

    @property
    def version(self) -> str | None:
        return self.installed.version if self.installed is not None else None


def discover() -> dict[str, InstalledPlugin]:
    """Every installed plugin by name (the entry point name is the name in configuration).

    One pass over the installed distributions' entry points, which loads nothing and reads no
    other metadata: discovery is part of every command's start-up.
    """
    return {
        ep.name: InstalledPlugin(name=ep.name, module=ep.value, entry_point=ep)
        for ep in metadata.entry_points(group=GROUP)
    }


def resolve_names(
    configured: list[str] | None,
    installed: Mapping[str, InstalledPlugin],
    store: str | None = None,
    disabled: Sequence[str] = (),
) -> list[str]:
    """The plugins to mount: the configured list, or every installed plugin but stores; less `disabled`.

    Without a list, the standard features (`DEFAULT_PLUGINS`) come first, in their order, then
    the other installed plugins by name. The plugin `store-<store>` of the configured store,
    when one is installed, comes first (a store's plugin is mounted exactly when its store is
    the one in use). A disabled name must be an installed plugin.
    """
    for name in disabled:
        if name not in installed:
            known = ", ".join(sorted(installed)) or "(none)"
            raise PluginError(f"unknown plugin {name!r} in [host] disable; installed plugins: {known}")
    names = [name for name in _resolve_configured(configured, installed) if name not in disabled]
    store_plugin = f"{STORE_PREFIX}{store}"
    if store is not None and store_plugin in installed and store_plugin not in names:
        names.insert(0, store_plugin)
    return names


def _resolve_configured(configured: list[str] | None, installed: Mapping[str, InstalledPlugin]) -> list[str]:
    if configured is None:
        standard = [name for name in DEFAULT_PLUGINS if name in installed]
        others = sorted(name for name in installed if name not in DEFAULT_PLUGINS and not name.startswith(STORE_PREFIX))
        return standard + others
    seen: set[str] = set()
    for name in configured:
        if name in seen:
            raise PluginError(f"plugin {name!r} is named twice in [host] plugins")
        seen.add(name)
        if name not in installed:
            names = ", ".join(sorted(installed)) or "(none)"
            raise PluginError(f"unknown plugin {name!r}; installed plugins: {names}")
    return list(configured)


def command_plugin(command: str, installed: Mapping[str, InstalledPlugin]) -> str | None:
    """The installed plugin that adds `command`, as group `dsh.commands` says (nothing is imported)."""
    modules = {ep.value for ep in metadata.entry_points(group=COMMANDS_GROUP) if ep.name == command}
    return next((name for name, plugin in installed.items() if plugin.module in modules), None)


def unmounted_command(command: str, config: Config, installed: Mapping[str, InstalledPlugin]) -> str | None:
    """One line for a command of an installed plugin that is not mounted: what would mount it.

    None when no installed plugin declares `command`. The caller knows the plugin is not mounted.
    """
    plugin = command_plugin(command, installed)
    if plugin is None:
        return None
    quoted = json.dumps(plugin, ensure_ascii=False)
    if plugin.startswith(STORE_PREFIX):
        todo = f"set {config.where('store', plugin.removeprefix(STORE_PREFIX))}"
    elif plugin in config.disabled_plugins:
        todo = f"remove {quoted} from {config.where('disable')}"
    else:
        todo = f"add {quoted} to {config.where('plugins')}"
    command_text = json.dumps(command, ensure_ascii=False)
    return f"command {command_text} belongs to plugin {quoted}, installed but not mounted: {todo}"


class HostPluginManager(pluggy.PluginManager):
    """pluggy's plugin manager, telling watchers whenever a plugin is registered or unregistered.

    Callers of a hook that fires for every session event subscribe to the session only while
    some plugin implements the hook, so that appends publish nothing otherwise; a watcher is
    how they learn that a plugin registered later (at any time, as tests and plugins do)
    implements it after all.
    """

    def __init__(self, project_name: str) -> None:
        super().__init__(project_name)
        self._watchers: list[Callable[[], None]] = []

    def register(self, plugin: object, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        self._changed()
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> object | None:
        removed = super().unregister(plugin, name)
        self._changed()
        return removed

    def watch(self, watcher: Callable[[], None]) -> Callable[[], None]:
        """Call `watcher()` after every registration and unregistration; returns an unwatch function."""
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def _changed(self) -> None:
        for watcher in list(self._watchers):
            watcher()


def new_plugin_manager() -> HostPluginManager:
    pm = HostPluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    return pm


def hooks_of(pm: pluggy.PluginManager, plugin: object) -> tuple[str, ...]:
    """Names of the hooks `plugin` implements, sorted."""
    return tuple(sorted(caller.name for caller in pm.get_hookcallers(plugin) or ()))


def import_plugins(names: list[str], installed: Mapping[str, InstalledPlugin]) -> dict[str, object]:
    """Import every named plugin module before mounting any, naming the one that fails."""
    modules: dict[str, object] = {}
    for name in names:
        try:
            modules[name] = installed[name].load()
        except Exception as exc:
            raise PluginError(f"plugin {name!r} failed to import: {type(exc).__name__}: {exc}") from exc
    return modules


def mount_all(host: PluginHost, names: list[str], modules: Mapping[str, object]) -> list[MountedPlugin]:
    """Register and mount each plugin in order; on a failure, unmount the ones before it."""
    mounted: list[tuple[str, object]] = []
    records: list[MountedPlugin] = []
    pm = host.pm
    for name in names:
        module = modules[name]
        try:
            pm.register(module, name=name)
            others = [p for p in pm.get_plugins() if p is not module]
            with host.services.owned_by(name):
                pm.subset_hook_caller("dsh_mount", remove_plugins=others)(
                    host=host, config=host.config.plugin_table(name)
                )
        except Exception as exc:
            host.services.unregister_owned_by(name)
            if pm.is_registered(module):
                pm.unregister(module)
            unmount_all(host, mounted)
            if isinstance(exc, DshError):
                raise PluginError(f"plugin {name!r}: {exc}") from exc
            raise PluginError(f"plugin {name!r} failed to mount: {type(exc).__name__}: {exc}") from exc
        mounted.append((name, module))
        records.append(
            MountedPlugin(
                name=name,
                module=getattr(module, "__name__", repr(module)),
                hooks=hooks_of(pm, module),
                installed=host.installed.get(name),
            )
        )
    return records


def unmount_all(host: PluginHost, mounted: list[tuple[str, object]]) -> None:
    """Unmount in reverse order; a plugin whose unmount raises is logged as a warning (`dsh.plugins`)."""
    pm = host.pm
    for name, module in reversed(mounted):
        others = [p for p in pm.get_plugins() if p is not module]
        try:
            pm.subset_hook_caller("dsh_unmount", remove_plugins=others)(host=host)
        except Exception as exc:  # unmounting continues for the other plugins
            log.warning("plugin %r failed to unmount", name, exc_info=exc)
        host.services.unregister_owned_by(name)
        if pm.is_registered(module):
            pm.unregister(module)
