"""Opening the configured store: factories registered through `dsh_register_stores`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_host.errors import ConfigError
from dsh_host.hookspecs import StoreFactory
from dsh_host.store.base import SessionStore

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.host import Host


def store_factories(hook: HookRelay) -> dict[str, StoreFactory]:
    """Every store the registered plugins offer, by name, in registration order."""
    factories: dict[str, StoreFactory] = {}

    def register(name: str, factory: StoreFactory) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"store name must be a non-empty string, got {name!r}")
        if name in factories:
            raise ValueError(f"store {name!r} is already registered")
        factories[name] = factory

    hook.dsh_register_stores(register=register)
    return factories


def open_store(host: Host, name: str, table: dict[str, Any]) -> SessionStore:
    """Open the store registered as `name`; ConfigError naming the known ones when none is."""
    factories = store_factories(host.hook)
    factory = factories.get(name)
    if factory is None:
        known = ", ".join(factories) or "(none)"
        raise ConfigError(f"[host] store: unknown store {name!r}; registered stores: {known}")
    return factory(host, table)
