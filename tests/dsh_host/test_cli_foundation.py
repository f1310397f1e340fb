"""The `dsh` command's foundation: version, plugins, config, errors, plugin subcommands."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from dsh_host import __version__
from dsh_host.cli.main import main


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("DSH_CONFIG", raising=False)
    monkeypatch.delenv("DSH_LOAD_PLUGINS", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("platformdirs.user_config_dir", lambda name: str(tmp_path / "no-user-config"))


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"dsh {__version__}"


def test_global_options_are_read_once_before_the_command(capsys, tmp_path):
    (tmp_path / "chosen.toml").write_text('[host]\nplugins = ["retention"]\n')
    assert main(["--debug", "--config", str(tmp_path / "chosen.toml"), "config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["file"] == str(tmp_path / "chosen.toml")
    assert main([f"--config={tmp_path / 'chosen.toml'}", "--debug", "plugins", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mounted"] == ["retention"]


def test_global_options_are_listed_in_help_and_not_as_group_options(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--config PATH  Read this configuration file." in out
    assert "--debug        Print tracebacks on errors." in out
    assert "--version      Print the version and exit." in out
    options = out.split("Options:", 1)[1].split("Commands:", 1)[0]
    assert options.split() == ["-h,", "--help", "Show", "this", "message", "and", "exit."]


def test_config_without_a_path_is_a_usage_error(capsys):
    assert main(["--config"]) == 2
    assert capsys.readouterr().err == "dsh: error: Option '--config' requires an argument.\n"


def test_plugins_json_lists_installed_and_mounted(capsys, monkeypatch):
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "retention,compact")
    assert main(["plugins", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = {p["name"]: p for p in out["installed"]}
    assert {"compact", "retention", "session-reference", "fs-read"} <= set(names)
    assert out["mounted"] == ["retention", "compact"]
    assert names["retention"]["mounted"] and "dsh_mount" in names["retention"]["hooks"]
    assert not names["session-reference"]["mounted"]


def test_config_json_shows_origins(capsys, tmp_path):
    (tmp_path / "dsh.toml").write_text('[host]\nmodel = "scripted"\nplugins = ["retention"]\n')
    assert main(["config", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == str(tmp_path / "dsh.toml")
    assert out["origins"]["host.model"] == str(tmp_path / "dsh.toml")
    assert out["origins"]["models"] == "defaults"
    assert out["mounted"] == ["retention"]


def test_syntax_error_is_one_line_exit_2(capsys, tmp_path):
    (tmp_path / "dsh.toml").write_text("[host\n")
    assert main(["plugins"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dsh: error: {tmp_path / 'dsh.toml'}:1:")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_unknown_plugin_exit_2(capsys, monkeypatch):
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "nope")
    assert main(["plugins"]) == 2
    err = capsys.readouterr().err
    assert "unknown plugin 'nope'" in err and "session-reference" in err


def test_bad_value_for_every_command(capsys, tmp_path):
    (tmp_path / "dsh.toml").write_text("[plugins.session-reference]\nmax_references = 4\n")
    for argv in (["plugins"], ["config"], ["sessions", "list"]):
        assert main(argv) == 2
        assert "[plugins.session-reference] max_references must be an integer in 1..3, got 4" in capsys.readouterr().err


def test_usage_error_is_exit_2(capsys):
    assert main(["sessions", "show"]) == 2
    assert capsys.readouterr().err.startswith("dsh: error:")


def test_plugin_adds_subcommand_through_dsh_register_commands(tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    (site / "cmdplug-0.1.dist-info").mkdir(parents=True)
    (site / "cmdplug-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: cmdplug\nVersion: 0.1\n")
    (site / "cmdplug-0.1.dist-info" / "entry_points.txt").write_text("[dsh]\nhello = cmdplug_hello\n")
    (site / "cmdplug_hello.py").write_text(
        textwrap.dedent(
            """
            import click
            from dsh_host import hookimpl

            @hookimpl
            def dsh_register_commands(cli):
                @cli.command()
                def hello():
                    click.echo("hello from a plugin")
            """
        )
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "hello")
    assert main(["hello"]) == 0
    assert capsys.readouterr().out.strip() == "hello from a plugin"
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "")
    assert main(["hello"]) == 2  # not mounted: the command does not exist


def test_console_script_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "dsh_host.cli.main", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == f"dsh {__version__}"
