"""The model registry: adapters by provider name, and `[host] model` specs resolved to them.

Adapters are registered by plugins through `dsh_register_models` and built on first use, so a
host that never talks to a model never constructs one. A spec is `provider` or
`provider:model`. A provider whose `[models.<provider>]` table names an `api_key_env` that is
unset cannot run: resolving it raises `ModelUnavailable`, naming the variable. Nothing stands in
for it: the keyless scripted model answers only when it is the model asked for (or the default),
so no caller takes its text for a real model's answer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dsh_host.config import Config
from dsh_host.errors import ConfigError, DshError
from dsh_host.models.base import JsonDict, ModelAdapter, ModelFailure, ModelRequest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from pluggy import HookRelay

    from dsh_host.host import Host


class ModelHost(Protocol):
    """What the registry uses of a host: its hook relay and configuration."""

    @property
    def hook(self) -> HookRelay: ...

    config: Config


AdapterFactory = Callable[["Host"], ModelAdapter]
"""Builds an adapter for a host: `factory(host)`."""

KEYLESS_PROVIDER = "scripted"


@dataclass(frozen=True)
class ResolvedModel:
    """A model spec resolved to its adapter."""

    provider: str
    model: str
    adapter: ModelAdapter


class ModelUnavailable(DshError):
    """The model asked for cannot run (its API key variable is unset); the message names what to set.

    `placeholder` is the model as configured with an adapter that refuses every call, for a
    front end that must still show a session (the terminal UI, which then sends nothing).
    """

    exit_code = 1

    def __init__(self, provider: str, model: str, variable: str) -> None:
        super().__init__(f'model "{provider}:{model}" needs an API key: set {variable}', code="MODEL_UNAVAILABLE")
        self.variable = variable
        self.placeholder = ResolvedModel(provider, model, _Refusing(str(self)))


class _Refusing:
    """The adapter of a model that cannot run: every call fails, saying why."""

    def __init__(self, why: str) -> None:
        self._why = why

    def stream(self, request: ModelRequest) -> AsyncIterator[JsonDict]:
        return self

    def __aiter__(self) -> AsyncIterator[JsonDict]:
        return self

    async def __anext__(self) -> JsonDict:
        raise ModelFailure(self._why, "MODEL_UNAVAILABLE")

    def context_window(self, model: str) -> int | None:
        return None


class ModelRegistry:
    """Model adapters by provider name, built lazily and cached."""

    def __init__(self, host: Host, env: Mapping[str, str] | None = None) -> None:
        self._host = host
        self._env = os.environ if env is None else env
        self._factories: dict[str, AdapterFactory] = {}
        self._adapters: dict[str, ModelAdapter] = {}

    @classmethod
    def from_hooks(cls, host: Host, env: Mapping[str, str] | None = None) -> ModelRegistry:
        """A registry holding every adapter the host's plugins register."""
        registry = cls(host, env)
        host.hook.dsh_register_models(register=registry.register)
        return registry

    def register(self, name: str, factory: AdapterFactory) -> None:
        """Add `factory` under the provider `name`; a taken or empty name is a ValueError."""
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError(f"model provider name must be a non-empty string without ':', got {name!r}")
        if name in self._factories:
            raise ValueError(f"model provider {name!r} is already registered")
        self._factories[name] = factory

    def names(self) -> list[str]:
        """Registered provider names, in registration order."""
        return list(self._factories)

    def adapter(self, provider: str) -> ModelAdapter:
        """The adapter of `provider`, built on first use; ConfigError for an unknown provider."""
        adapter = self._adapters.get(provider)
        if adapter is None:
            factory = self._factories.get(provider)
            if factory is None:
                raise ConfigError(self._unknown(provider))
            adapter = self._adapters[provider] = factory(self._host)
        return adapter

    def resolve(self, spec: str | None = None) -> ResolvedModel:
        """Resolve `provider[:model]` (default: `[host] model`) to its adapter.

        The model defaults to `[models.<provider>] model`, else the provider's name.
        `ModelUnavailable` when the provider's `api_key_env` names an unset variable.
        """
        if spec is None:
            spec = self._host.config.host["model"]
        provider, _, model = spec.partition(":")
        if provider not in self._factories:
            raise ConfigError(self._unknown(provider, spec))
        table = self._host.config.model_table(provider)
        model = model or table.get("model") or provider
        key_env = table.get("api_key_env")
        if key_env and not self._env.get(key_env) and provider != KEYLESS_PROVIDER:
            raise ModelUnavailable(provider, model, key_env)
        return ResolvedModel(provider, model, self.adapter(provider))

    def _unknown(self, provider: str, spec: str | None = None) -> str:
        where = f" in model {spec!r}" if spec is not None and spec != provider else ""
        known = ", ".join(self._factories) or "(none)"
        return f"unknown model provider {provider!r}{where}; registered providers: {known}"
