"""The model registry: adapters by provider name, and `[host] model` specs resolved to them.

Adapters are registered by plugins through `dsh_register_models` and built on first use, so a
host that never talks to a model never constructs one. A spec is `provider` or
`provider:model`; a provider whose `[models.<provider>]` table names an `api_key_env` that is
unset falls back to the keyless scripted model, with a notice saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dsh_host.config import Config
from dsh_host.errors import ConfigError
from dsh_host.models.base import ModelAdapter

if TYPE_CHECKING:
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
    """A model spec resolved to its adapter; `notice` explains a fallback, if one happened."""

    provider: str
    model: str
    adapter: ModelAdapter
    notice: str | None = None


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
        """
        if spec is None:
            spec = self._host.config.host["model"]
        provider, _, model = spec.partition(":")
        if provider not in self._factories:
            raise ConfigError(self._unknown(provider, spec))
        table = self._host.config.model_table(provider)
        key_env = table.get("api_key_env")
        if key_env and not self._env.get(key_env) and provider != KEYLESS_PROVIDER:
            keyless = self.resolve(KEYLESS_PROVIDER)
            notice = f"no API key in ${key_env}: the {KEYLESS_PROVIDER} model answers (keyless)"
            return ResolvedModel(keyless.provider, keyless.model, keyless.adapter, notice)
        model = model or table.get("model") or provider
        return ResolvedModel(provider, model, self.adapter(provider))

    def _unknown(self, provider: str, spec: str | None = None) -> str:
        where = f" in model {spec!r}" if spec is not None and spec != provider else ""
        known = ", ".join(self._factories) or "(none)"
        return f"unknown model provider {provider!r}{where}; registered providers: {known}"
