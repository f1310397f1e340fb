"""The `retention` plugin mounts a service and takes no settings."""

from __future__ import annotations

import subprocess
import sys

import pluggy
import pytest

from dsh_host import ConfigError
from dsh_retention import plugin

hookspec = pluggy.HookspecMarker("dsh")


class FakeServices:
    def __init__(self) -> None:
        self.registered: dict[str, object] = {}

    def register(self, name: str, service: object) -> None:
        self.registered[name] = service


class FakeHost:
    def __init__(self) -> None:
        self.services = FakeServices()


class MountSpec:
    @hookspec
    def dsh_mount(self, host: object, config: dict[str, object]) -> None:
        """Stand-in for the host's mount hook spec."""


def test_mount_registers_the_retention_service() -> None:
    host = FakeHost()

    plugin.dsh_mount(host=host, config={})

    service = host.services.registered["retention"]
    assert service.retain_head_tail("abcdefghij", 3, 3).text == "abchij"  # type: ignore[attr-defined]
    retainer = service.TextRetainer.head(2)  # type: ignore[attr-defined]
    retainer.push("abc")
    assert retainer.finish().text == "ab"


def test_mount_rejects_any_key_as_a_config_error() -> None:
    host = FakeHost()

    with pytest.raises(ConfigError, match=r"^\[plugins.retention\] unknown key 'max_bytes'$"):
        plugin.dsh_mount(host=host, config={"max_bytes": 10})
    assert host.services.registered == {}


def test_the_plugin_module_imports_without_the_host() -> None:
    # Only the hook needs dsh_host (for ConfigError), so importing the entry point loads none of it.
    code = "import sys, dsh_retention.plugin; assert 'dsh_host' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pluggy_finds_the_mount_hook() -> None:
    manager = pluggy.PluginManager("dsh")
    manager.add_hookspecs(MountSpec)
    manager.register(plugin, name="retention")
    host = FakeHost()

    manager.hook.dsh_mount(host=host, config={})

    assert "retention" in host.services.registered
