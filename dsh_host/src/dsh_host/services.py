"""The service registry: features reached by name (`host.services.session_query`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Services:
    """Named services registered by the host and its plugins.

    An absent feature is simply absent: attribute access raises AttributeError naming it, and
    `get` returns None, so callers probe optional capabilities with `host.services.get(...)`.
    """

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._owners: dict[str, str | None] = {}
        self._mounting: str | None = None

    def register(self, name: str, service: Any, *, owner: str | None = None) -> None:
        """Register `service` under `name`; registering a taken name is an error."""
        if name in self._items:
            raise ValueError(f"service {name!r} is already registered")
        self._items[name] = service
        self._owners[name] = owner if owner is not None else self._mounting

    @contextmanager
    def owned_by(self, plugin: str) -> Iterator[None]:
        """Attribute services registered inside the block to `plugin` (the host mounts with it)."""
        previous, self._mounting = self._mounting, plugin
        try:
            yield
        finally:
            self._mounting = previous

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)
        self._owners.pop(name, None)

    def unregister_owned_by(self, owner: str) -> None:
        """Remove every service `owner` registered (used when a plugin unmounts)."""
        for name in [n for n, o in self._owners.items() if o == owner]:
            self.unregister(name)

    def get(self, name: str, default: Any = None) -> Any:
        return self._items.get(name, default)

    def providing(self, capability: type) -> Any:
        """The first registered service that is a `capability` (a runtime-checkable protocol), or None.

        For a feature asked for by what it does rather than by the name a plugin gave it.
        """
        for service in self._items.values():
            if isinstance(service, capability):
                return service
        return None

    def owner_of(self, name: str) -> str | None:
        return self._owners.get(name)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_items"][name]
        except KeyError:
            raise AttributeError(f"service {name!r} is not mounted") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))
