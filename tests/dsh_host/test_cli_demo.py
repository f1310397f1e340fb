"""`dsh demo` finds the services it needs by what they provide, and says which are missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_host.cli.demo import DemoError, find_service, required_services
from dsh_host.config import load_config
from dsh_host.host import Host


def start_host(tmp_path: Path, plugins: str) -> Host:
    return Host.start(load_config(env={"DSH_HOME": str(tmp_path), "DSH_LOAD_PLUGINS": plugins}, cwd=tmp_path))


class Mentions:
    def format_mention(self, session_id, label=None):
        return f"@{label or session_id}"


class Compactor:
    async def compact_now(self, target, *, retain_tokens=None):
        return None


def test_the_standard_plugins_provide_both(tmp_path):
    with start_host(tmp_path, "compact,session-reference") as host:
        compactor, mentions = required_services(host)
    assert hasattr(compactor, "compact_now") and hasattr(mentions, "format_mention")


@pytest.mark.parametrize(
    ("plugins", "missing"),
    [
        ("", "a compaction service (compact_now) and a session-reference service (format_mention)"),
        ("compact", "a session-reference service (format_mention)"),
        ("session-reference", "a compaction service (compact_now)"),
    ],
)
def test_missing_capabilities_are_named(tmp_path, plugins, missing):
    with start_host(tmp_path, plugins) as host, pytest.raises(DemoError) as caught:
        required_services(host)
    expected = f"dsh demo needs {missing}, which no mounted plugin provides: install the plugins that do"
    assert str(caught.value) == expected


def test_any_service_under_any_name_that_provides_the_capability_serves(tmp_path):
    with start_host(tmp_path, "") as host:
        host.services.register("my-compactor", Compactor())
        host.services.register("my-mentions", Mentions())
        compactor, mentions = required_services(host)
        assert isinstance(compactor, Compactor) and isinstance(mentions, Mentions)
        assert find_service(host, type(None)) is None
