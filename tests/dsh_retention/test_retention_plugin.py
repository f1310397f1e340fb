"""The `retention` plugin mounts a service and takes no settings."""

from __future__ import annotations

import subprocess
import sys

import pluggy
import pytest

from dsh_host import ConfigError, Services
from dsh_retention import plugin

hookspec = pluggy.HookspecMarker("dsh")


class FakeHost:
    def __init__(self) -> None:
        self.services = Services()


class MountSpec:
    @hookspec
    def dsh_mount(self, host: object, config: dict[str, object]) -> None:
        """Stand-in for the host's mount hook spec."""


def test_mount_registers_the_retention_service() -> None:
    host = FakeHost()

    plugin.dsh_mount(host=host, config={})

    service = host.services.retention
    assert service.retain_head_tail("abcdefghij", 3, 3).text == "abchij"  # type: ignore[attr-defined]
    retainer = service.TextRetainer.head(2)  # type: ignore[attr-defined]
    retainer.push("abc")
    assert retainer.finish().text == "ab"


def test_mount_rejects_any_key_as_a_config_error() -> None:
    host = FakeHost()

    with pytest.raises(ConfigError, match=r"^\[plugins.retention\] unknown key 'max_bytes'$"):
        plugin.dsh_mount(host=host, config={"max_bytes": 10})
    assert list(host.services) == []


def test_the_plugin_module_imports_without_the_host() -> None:
    # Only the hook needs dsh_host (for ConfigError), so importing the entry point loads none of it.
    code = "import sys, dsh_retention.plugin; assert 'dsh_host' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mounting_loads_none_of_the_library_until_the_service_is_used() -> None:
    # Every dsh command mounts the plugin; only a command that retains text should pay for it.
    code = (
        "import sys\n"
        "from dsh_host import Services\n"
        "from dsh_retention import plugin\n"
        "class Host:\n"
        "    services = Services()\n"
        "plugin.dsh_mount(host=Host, config={})\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('dsh_retention.') and m != 'dsh_retention.plugin')\n"
        "assert loaded == [], loaded\n"
        "assert Host.services.retention.retain_head_tail('abcdef', 1, 1).text == 'af'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pluggy_finds_the_mount_hook() -> None:
    manager = pluggy.PluginManager("dsh")
    manager.add_hookspecs(MountSpec)
    manager.register(plugin, name="retention")
    host = FakeHost()

    manager.hook.dsh_mount(host=host, config={})

    assert "retention" in host.services
