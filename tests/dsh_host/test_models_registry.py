"""The model registry: registration through the hook, lazy adapters, and model specs resolved."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from dsh_host import ModelRequest, builtins
from dsh_host.config import load_config
from dsh_host.errors import ConfigError
from dsh_host.hookspecs import hookimpl
from dsh_host.models import ModelFailure, ModelUnavailable
from dsh_host.models.openai import OpenAIAdapter
from dsh_host.models.registry import ModelRegistry, ResolvedModel
from dsh_host.models.scripted import ScriptedAdapter
from dsh_host.plugins import new_plugin_manager

KEY = {"DEEPSEEK_API_KEY": "sk-test"}


class EchoModels:
    """A throwaway plugin adding one provider and counting how often it is built."""

    def __init__(self, name: str = "echo") -> None:
        self.name = name
        self.built = 0

    @hookimpl
    def dsh_register_models(self, register):
        register(self.name, self.factory)

    def factory(self, host):
        self.built += 1
        return ScriptedAdapter()


def make_host(tmp_path: Path, toml: str = "", *plugins: object) -> SimpleNamespace:
    (tmp_path / "dsh.toml").write_text(toml)
    pm = new_plugin_manager()
    pm.register(builtins, name="dsh-host")
    for plugin in plugins:
        pm.register(plugin)
    return SimpleNamespace(hook=pm.hook, config=load_config(env={}, cwd=tmp_path))


def test_builtin_and_plugin_providers_are_registered(tmp_path: Path):
    registry = ModelRegistry.from_hooks(make_host(tmp_path, "", EchoModels()), env={})
    assert sorted(registry.names()) == ["echo", "openai", "scripted"]


def test_adapters_are_built_lazily_once(tmp_path: Path):
    echo = EchoModels()
    registry = ModelRegistry.from_hooks(make_host(tmp_path, "", echo), env={})
    assert echo.built == 0
    adapter = registry.adapter("echo")
    assert registry.adapter("echo") is adapter
    assert registry.resolve("echo").adapter is adapter
    assert echo.built == 1


def test_default_spec_is_the_keyless_scripted_model(tmp_path: Path):
    resolved = ModelRegistry.from_hooks(make_host(tmp_path), env={}).resolve()
    assert (resolved.provider, resolved.model) == ("scripted", "scripted")
    assert isinstance(resolved.adapter, ScriptedAdapter)


def test_provider_and_model_from_the_spec(tmp_path: Path):
    registry = ModelRegistry.from_hooks(make_host(tmp_path), env=KEY)
    resolved = registry.resolve("openai:deepseek-reasoner")
    assert (resolved.provider, resolved.model) == ("openai", "deepseek-reasoner")
    assert isinstance(resolved.adapter, OpenAIAdapter)


def test_a_bare_provider_takes_the_configured_model(tmp_path: Path):
    host = make_host(tmp_path, '[host]\nmodel = "openai"\n[models.openai]\nmodel = "deepseek-coder"\n')
    resolved = ModelRegistry.from_hooks(host, env=KEY).resolve()
    assert (resolved.provider, resolved.model) == ("openai", "deepseek-coder")
    assert ModelRegistry.from_hooks(make_host(tmp_path), env=KEY).resolve("openai").model == "deepseek-chat"


def test_without_a_key_the_model_cannot_run_and_nothing_stands_in(tmp_path: Path):
    registry = ModelRegistry.from_hooks(make_host(tmp_path), env={"DEEPSEEK_API_KEY": ""})
    with pytest.raises(ModelUnavailable) as caught:
        registry.resolve("openai:deepseek-chat")
    assert str(caught.value) == 'model "openai:deepseek-chat" needs an API key: set DEEPSEEK_API_KEY'
    assert (caught.value.exit_code, caught.value.code, caught.value.variable) == (
        1,
        "MODEL_UNAVAILABLE",
        "DEEPSEEK_API_KEY",
    )
    # What a front end that must still show the session holds: the model as configured, refusing every call.
    placeholder = caught.value.placeholder
    assert (placeholder.provider, placeholder.model) == ("openai", "deepseek-chat")
    request = ModelRequest(provider="openai", model="deepseek-chat", messages=[])

    async def first_chunk() -> object:
        return await placeholder.adapter.stream(request).__anext__()

    with pytest.raises(ModelFailure, match="needs an API key: set DEEPSEEK_API_KEY"):
        asyncio.run(first_chunk())
    # The keyless model answers when it is the one asked for.
    assert registry.resolve("scripted") == ResolvedModel("scripted", "scripted", registry.adapter("scripted"))


def test_the_error_names_the_configured_key_variable(tmp_path: Path):
    host = make_host(tmp_path, '[models.openai]\napi_key_env = "MY_LLM_KEY"\n')
    with pytest.raises(ModelUnavailable, match=r'^model "openai:deepseek-chat" needs an API key: set MY_LLM_KEY$'):
        ModelRegistry.from_hooks(host, env=KEY).resolve("openai")
    assert ModelRegistry.from_hooks(host, env={"MY_LLM_KEY": "k"}).resolve("openai").provider == "openai"


def test_unknown_provider_names_it_and_the_registered_ones(tmp_path: Path):
    registry = ModelRegistry.from_hooks(make_host(tmp_path), env={})
    with pytest.raises(ConfigError) as caught:
        registry.resolve("anthropic:claude")
    message = str(caught.value)
    assert "'anthropic'" in message and "scripted" in message and "openai" in message
    with pytest.raises(ConfigError, match="unknown model provider 'nope'"):
        registry.adapter("nope")


def test_duplicate_registration_is_an_error(tmp_path: Path):
    with pytest.raises(ValueError, match="'scripted' is already registered"):
        ModelRegistry.from_hooks(make_host(tmp_path, "", EchoModels("scripted")), env={})


def test_bad_provider_names_are_rejected(tmp_path: Path):
    registry = ModelRegistry(make_host(tmp_path), env={})
    for name in ("", "a:b"):
        with pytest.raises(ValueError, match="non-empty string without ':'"):
            registry.register(name, lambda host: ScriptedAdapter())
