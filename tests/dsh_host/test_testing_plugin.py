"""dsh-host's pytest plugin (`dsh_host.testing`): loaded through `pytest11`, its fixtures and helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import dsh_host.testing.plugin
from dsh_host import Host, hookimpl
from dsh_host.testing import CliResult, DshRunner, HostFactory, LogBuilder


class Recorder:
    """A throwaway plugin object: records its mount table and every agent created."""

    def __init__(self) -> None:
        self.tables: list[dict] = []
        self.agents: list[object] = []

    @hookimpl
    def dsh_mount(self, host, config):
        self.tables.append(config)

    @hookimpl
    def dsh_agent_created(self, agent):
        self.agents.append(agent)


def test_the_plugin_is_loaded_through_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.get_plugin("dsh-host") is dsh_host.testing.plugin


def test_dsh_host_mounts_nothing_and_keeps_its_data_in_tmp_path(dsh_host, tmp_path):
    assert isinstance(dsh_host, Host)
    assert dsh_host.mounted == []
    assert dsh_host.data_dir == tmp_path / "data"


async def test_make_host_mounts_plugins_objects_tables_and_a_script(make_host, tmp_path):
    mine = Recorder()
    host = make_host(
        ["session-reference"],
        objects={"mine": mine},
        script=[{"text": "scripted answer"}],
        session_reference={"max_references": 2},
        mine={"x": 1},
    )
    assert [p.name for p in host.mounted] == ["session-reference", "mine"]
    assert host.config.plugin_table("session-reference") == {"max_references": 2}
    assert mine.tables == [{"x": 1}]
    agent = await host.open_agent(cwd=tmp_path)
    result = await agent.submit("hello")
    await agent.close()
    assert (result.reason, result.text) == ("completed", "scripted answer")
    assert mine.agents == [agent]


async def test_hosts_of_one_test_share_the_data_dir_unless_told_otherwise(make_host, tmp_path):
    async with make_host() as first:
        agent = await first.open_agent(cwd=tmp_path)
        await agent.submit("remember me")
        await agent.close()
    assert [r.id for r in make_host().store.list_sessions()] == [agent.session.id]
    assert make_host(data_dir=tmp_path / "elsewhere").store.list_sessions() == []


def test_config_merges_over_the_factory_s_own(make_host):
    host = make_host(config={"host": {"model": "openai"}, "models": {"scripted": {"context_window": 7}}})
    assert host.config.host["model"] == "openai"
    assert host.config.model_table("scripted")["context_window"] == 7
    assert host.config.plugin_names == []


def test_the_factory_closes_every_host_it_started(tmp_path):
    factory = HostFactory(tmp_path)
    mine = Recorder()
    host = factory(objects={"mine": mine})
    _ = host.store
    factory.close()
    assert host.mounted == []
    factory.close()  # twice is harmless


def test_dsh_cli_runs_the_command_line_hermetically(dsh_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_CONFIG", str(tmp_path / "absent.toml"))  # would fail the command if seen
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "compact")
    result = dsh_cli("plugins", "--json")
    assert isinstance(result, CliResult)
    assert (result.exit_code, result.stderr) == (0, "")
    assert json.loads(result.stdout)["mounted"] == []
    dsh_cli.plugins = ["compact"]
    assert json.loads(dsh_cli("plugins", "--json").stdout)["mounted"] == ["compact"]
    assert json.loads(dsh_cli("config", "--json").stdout)["data_dir"] == str(dsh_cli.home)
    assert dsh_cli("sessions", "show", "nope") == (1, "", 'dsh: error: session "nope" not found\n')


def test_dsh_cli_takes_stdin_extra_environment_and_a_working_dir(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "dsh.toml").write_text('[host]\nmodel = "scripted"\n')
    runner = DshRunner(tmp_path, env={"DSH_HOME": str(tmp_path / "other")})
    runner.cwd = tmp_path / "work"
    out = json.loads(runner("config", "--json", input="").stdout)
    assert out["file"] == str(tmp_path / "work" / "dsh.toml")
    assert out["data_dir"] == str(tmp_path / "other")


def test_log_builder_is_the_shared_builder(log_builder):
    assert log_builder is LogBuilder
    events = log_builder.events([log_builder.user(0, "hi"), log_builder.assistant(1, "ok")])
    assert [e.type for e in events] == ["user/message", "assistant/message"]


def test_the_helpers_import_without_pytest_and_dsh_host_does_not_import_them():
    code = (
        "import sys; sys.modules['pytest'] = None\n"
        "import dsh_host; assert 'dsh_host.testing' not in sys.modules\n"
        "from dsh_host.testing import DshRunner, HostFactory, LogBuilder\n"
        "print(LogBuilder.user(0)['type'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "user/message\n", "")
