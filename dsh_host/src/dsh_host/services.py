"""The service registry: features reached by name (`host.services.session_query`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_ABSENT = object()


class Services:
    """Named services registered by the host and its plugins.

    An absent feature is simply absent: attribute access raises AttributeError naming it, and
    `get` returns None, so callers probe optional capabilities with `host.services.get(...)`.
    A service may be registered ready-made (`register`) or as a factory (`register_factory`)
    that builds it when it is first asked for.
    """

    def __init__(self) -> None:
        self._items: dict[str, object] = {}
        self._factories: dict[str, Callable[[], object]] = {}
        self._owners: dict[str, str | None] = {}
        self._mounting: str | None = None
        # Reentrant: a factory may ask for another service that is built on demand.
        self._building = threading.RLock()

    def register(self, name: str, service: object, *, owner: str | None = None) -> None:
        """Register `service` under `name`; registering a taken name is an error."""
        self._claim(name, owner)
        self._items[name] = service

    def register_factory(self, name: str, build: Callable[[], object], *, owner: str | None = None) -> None:
        """Register under `name` the service `build()` returns, built when it is first asked for.

        For a service whose making, or the modules it needs, costs time: every `dsh` command
        mounts every configured plugin, and most never use a given service. The name is taken
        at once (`name in services`, iteration); `build` runs once, on the first `get` or
        attribute access, and what it raises reaches that caller. Validate the configuration in
        `dsh_mount`, before registering, so a bad table still fails start-up.
        """
        self._claim(name, owner)
        self._factories[name] = build

    def _claim(self, name: str, owner: str | None) -> None:
        if name in self._owners:
            raise ValueError(f"service {name!r} is already registered")
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
        self._factories.pop(name, None)
        self._owners.pop(name, None)

    def unregister_owned_by(self, owner: str) -> None:
        """Remove every service `owner` registered (used when a plugin unmounts)."""
        for name in [n for n, o in self._owners.items() if o == owner]:
            self.unregister(name)

    def get(self, name: str, default: object = None) -> Any:  # a plugin's object: its caller knows its type
        if name in self._items:
            return self._items[name]
        if name in self._factories:
            return self._build(name, default)
        return default

    def _build(self, name: str, absent: object) -> object:
        with self._building:
            if name in self._items:  # another thread built it meanwhile
                return self._items[name]
            build = self._factories.get(name)
            if build is None:  # unregistered meanwhile
                return absent
            service = build()
            self._items[name] = service
            del self._factories[name]
            return service

    def providing(self, capability: type) -> Any:
        """The first registered service that is a `capability` (a runtime-checkable protocol), or None.

        For a feature asked for by what it does rather than by the name a plugin gave it. Services
        are looked at in the order they were registered; one registered as a factory is built
        when its turn comes (its type is known only then).
        """
        for name in list(self._owners):
            service = self.get(name)
            if isinstance(service, capability):
                return service
        return None

    def owner_of(self, name: str) -> str | None:
        return self._owners.get(name)

    def __getattr__(self, name: str) -> Any:  # as `get`
        state = self.__dict__
        if name in state.get("_items", ()):
            return state["_items"][name]
        if name in state.get("_factories", ()):
            service = self._build(name, _ABSENT)
            if service is not _ABSENT:
                return service
        raise AttributeError(f"service {name!r} is not mounted")

    def __contains__(self, name: object) -> bool:
        return name in self._owners

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._owners))
