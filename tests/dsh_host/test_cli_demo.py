"""`dsh demo` finds the services it needs by what they provide, and says which are missing."""

from __future__ import annotations

import pytest

from dsh_host.cli.demo import DemoError, required_services


class Mentions:
    def format_mention(self, session_id, label=None):
        return f"@{label or session_id}"


class Compactor:
    async def compact_now(self, target, *, retain_tokens=None):
        return None


def test_the_standard_plugins_provide_both(make_host):
    with make_host(["compact", "session-reference"]) as host:
        compactor, mentions = required_services(host)
    assert hasattr(compactor, "compact_now") and hasattr(mentions, "format_mention")


@pytest.mark.parametrize(
    ("plugins", "missing"),
    [
        ([], "a compaction service (compact_now) and a session-reference service (format_mention)"),
        (["compact"], "a session-reference service (format_mention)"),
        (["session-reference"], "a compaction service (compact_now)"),
    ],
)
def test_missing_capabilities_are_named(make_host, plugins, missing):
    with make_host(plugins) as host, pytest.raises(DemoError) as caught:
        required_services(host)
    expected = f"dsh demo needs {missing}, which no mounted plugin provides: install the plugins that do"
    assert str(caught.value) == expected


def test_any_service_under_any_name_that_provides_the_capability_serves(make_host):
    with make_host() as host:
        host.services.register("my-compactor", Compactor())
        host.services.register("my-mentions", Mentions())
        compactor, mentions = required_services(host)
        assert isinstance(compactor, Compactor) and isinstance(mentions, Mentions)
        assert host.services.providing(type(None)) is None
