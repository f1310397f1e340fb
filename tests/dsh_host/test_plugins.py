"""The plugin host: discovery, mounting order, failures, the waterfall pattern, services."""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_host import ConfigError, hookimpl
from dsh_host.agent.decisions import Allow, Block
from dsh_host.asyncs import resolve
from dsh_host.config import load_config
from dsh_host.errors import PluginError
from dsh_host.host import Host
from dsh_host.plugins import new_plugin_manager


def start(tmp_path: Path, plugins: str, **files: str) -> Host:
    config_file = tmp_path / "dsh.toml"
    config_file.write_text(files.get("toml", ""))
    env = {"DSH_HOME": str(tmp_path / "data"), "DSH_LOAD_PLUGINS": plugins}
    return Host.start(load_config(env=env, cwd=tmp_path))


@pytest.fixture
def fake_plugins(tmp_path, monkeypatch):
    """Install throwaway entry-point plugins (a real dist-info on sys.path)."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "fakeplug-0.1.dist-info").mkdir()
    (root / "fakeplug-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n")
    (root / "fakeplug-0.1.dist-info" / "entry_points.txt").write_text(
        "[dsh]\nrecorder = fakeplug_recorder\nbroken-import = fakeplug_broken\nbroken-mount = fakeplug_badmount\n"
        "broken-unmount = fakeplug_badunmount\n"
    )
    (root / "fakeplug_recorder.py").write_text(
        textwrap.dedent(
            """
            from dsh_host import hookimpl
            CALLS = []

            @hookimpl
            def dsh_mount(host, config):
                CALLS.append(("mount", dict(config)))
                host.services.register("recorder", CALLS)

            @hookimpl
            def dsh_unmount(host):
                CALLS.append(("unmount",))
            """
        )
    )
    (root / "fakeplug_broken.py").write_text("raise RuntimeError('boom at import')\n")
    (root / "fakeplug_badmount.py").write_text(
        textwrap.dedent(
            """
            from dsh_host import hookimpl

            @hookimpl
            def dsh_mount(host, config):
                host.services.register("half", object())
                raise ValueError("boom at mount")
            """
        )
    )
    (root / "fakeplug_badunmount.py").write_text(
        textwrap.dedent(
            """
            from dsh_host import hookimpl

            @hookimpl
            def dsh_unmount(host):
                raise ValueError("boom at unmount")
            """
        )
    )
    modules = ("fakeplug_recorder", "fakeplug_broken", "fakeplug_badmount", "fakeplug_badunmount")
    monkeypatch.syspath_prepend(str(root))
    for name in modules:
        sys.modules.pop(name, None)
    yield root
    for name in modules:
        sys.modules.pop(name, None)


def test_feature_entry_points_are_discovered_and_none_mounted_with_empty_switch(tmp_path):
    host = start(tmp_path, "")
    try:
        assert {"compact", "retention", "session-reference", "fs-read"} <= set(host.installed)
        assert host.mounted == []
        assert host.services.get("session_references") is None
        assert "session_query" in host.services  # the host's own read side is always there
    finally:
        host.close()


def test_configured_plugins_mount_in_order_with_their_tables(tmp_path, fake_plugins):
    (tmp_path / "dsh.toml").write_text('[host]\nplugins = ["retention", "recorder"]\n[plugins.recorder]\nx = 1\n')
    host = Host.start(load_config(env={"DSH_HOME": str(tmp_path / "d")}, cwd=tmp_path))
    import fakeplug_recorder

    try:
        assert [p.name for p in host.mounted] == ["retention", "recorder"]
        assert fakeplug_recorder.CALLS == [("mount", {"x": 1})]
        assert host.services.recorder is fakeplug_recorder.CALLS
        assert "dsh_mount" in host.mounted[1].hooks and "dsh_unmount" in host.mounted[1].hooks
    finally:
        host.close()
    assert fakeplug_recorder.CALLS[-1] == ("unmount",)
    assert host.services.get("recorder") is None


def test_unknown_plugin_lists_installed_names(tmp_path):
    with pytest.raises(PluginError) as info:
        start(tmp_path, "nope")
    assert "unknown plugin 'nope'" in str(info.value)
    assert "compact" in str(info.value) and "session-reference" in str(info.value)
    assert info.value.exit_code == 2


def test_import_failure_names_plugin_and_mounts_nothing(tmp_path, fake_plugins):
    with pytest.raises(PluginError) as info:
        start(tmp_path, "recorder,broken-import")
    assert "'broken-import'" in str(info.value) and "boom at import" in str(info.value)
    import fakeplug_recorder

    assert fakeplug_recorder.CALLS == []  # imports all happen before any mount


def test_mount_failure_rolls_back_earlier_plugins(tmp_path, fake_plugins):
    with pytest.raises(PluginError) as info:
        start(tmp_path, "recorder,broken-mount")
    assert "'broken-mount'" in str(info.value) and "ValueError: boom at mount" in str(info.value)
    import fakeplug_recorder

    assert fakeplug_recorder.CALLS == [("mount", {}), ("unmount",)]


def test_a_failing_unmount_is_a_logged_warning_and_the_others_still_unmount(tmp_path, fake_plugins, caplog, capsys):
    host = start(tmp_path, "recorder,broken-unmount")
    import fakeplug_recorder

    with caplog.at_level(logging.WARNING, logger="dsh"):
        host.close()

    assert fakeplug_recorder.CALLS[-1] == ("unmount",)
    [record] = caplog.records
    assert (record.name, record.levelname) == ("dsh.plugins", "WARNING")
    assert record.getMessage() == "plugin 'broken-unmount' failed to unmount"
    assert isinstance(record.exc_info[1], ValueError)
    assert capsys.readouterr() == ("", "")  # through logging only: library code prints nothing


def test_the_command_line_shows_an_unmount_warning_as_one_line(dsh_cli, tmp_path, fake_plugins):
    (tmp_path / "dsh.toml").write_text("")
    dsh_cli.home = tmp_path / "data"
    dsh_cli.plugins = ["broken-unmount"]

    code, _, err = dsh_cli("--config", str(tmp_path / "dsh.toml"), "plugins")

    assert code == 0
    assert err == "dsh: warning: plugin 'broken-unmount' failed to unmount: ValueError: boom at unmount\n"


@pytest.mark.parametrize("value", ["4", "0", "true", "1.5", '"3"'])
def test_bad_config_value_names_table_key_and_value(tmp_path, value):
    (tmp_path / "dsh.toml").write_text(f"[plugins.session-reference]\nmax_references = {value}\n")
    with pytest.raises(PluginError) as info:
        Host.start(load_config(env={"DSH_HOME": str(tmp_path), "DSH_LOAD_PLUGINS": "session-reference"}, cwd=tmp_path))
    message = str(info.value)
    assert "[plugins.session-reference] max_references" in message
    assert value.strip('"') in message


def test_config_error_type_is_usage(tmp_path):
    assert ConfigError("x").exit_code == 2


class Recorder:
    """A throwaway plugin recording the order hooks reach it."""

    def __init__(self, name, log, *, block=None, rewrite=None):
        self.name, self.log, self.block, self.rewrite = name, log, block, rewrite

    @hookimpl
    def dsh_agent_queued(self, agent, content, info):
        self.log.append(self.name)


class Blocker:
    @hookimpl(tryfirst=True)
    def dsh_prompt_submit(self, agent, content, source, signal, contexts):
        return Block("no") if content == "forbidden" else None


class Rewriter:
    @hookimpl(wrapper=True)
    def dsh_prompt_submit(self, agent, content, source, signal, contexts):
        downstream = yield

        async def rewritten():
            decision = await resolve(downstream)
            if isinstance(decision, Allow):
                return Allow(
                    content=[{"type": "text", "text": "rewritten"}],
                    additional_contexts=decision.additional_contexts,
                )
            return decision

        return rewritten()


def test_hook_order_is_last_registered_first(tmp_path):
    host = start(tmp_path, "")
    log: list[str] = []
    try:
        host.pm.register(Recorder("a", log))
        host.pm.register(Recorder("b", log))
        host.hook.dsh_agent_queued(agent=None, content=[], info={})
        assert log == ["b", "a"]
    finally:
        host.close()


def test_firstresult_waterfall_default_wrapper_and_block(tmp_path):
    host = start(tmp_path, "")
    ctx = [{"content": [], "source": {"kind": "plugin", "plugin": "x"}}]
    try:
        call = host.hook.dsh_prompt_submit
        assert call(agent=None, content="hi", source=None, signal=None, contexts=ctx) == Allow(additional_contexts=ctx)
        assert call(agent=None, content="hi", source=None, signal=None, contexts=[]) == Allow()
        host.pm.register(Rewriter())
        host.pm.register(Blocker())
        decision = asyncio.run(resolve(call(agent=None, content="hi", source=None, signal=None, contexts=ctx)))
        assert decision == Allow(content=[{"type": "text", "text": "rewritten"}], additional_contexts=ctx)
        blocked = asyncio.run(resolve(call(agent=None, content="forbidden", source=None, signal=None, contexts=ctx)))
        assert blocked == Block("no")
    finally:
        host.close()


def test_request_error_default_is_fail(tmp_path):
    host = start(tmp_path, "")
    try:
        result = host.hook.dsh_agent_request_error(
            agent=None, turn=1, step=1, error=None, failure={}, prior_failures=[], signal=None
        )
        assert result == "fail"
    finally:
        host.close()


def test_the_plugin_manager_tells_watchers_of_every_registration_until_unwatched():
    pm = new_plugin_manager()
    seen: list[int] = []
    unwatch = pm.watch(lambda: seen.append(len(pm.get_plugins())))
    plugin = object()
    pm.register(plugin, name="watched")
    pm.unregister(plugin)
    unwatch()
    pm.register(plugin, name="unwatched")
    assert seen == [1, 0]
