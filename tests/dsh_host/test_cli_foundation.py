"""The `dsh` command's foundation: version, plugins, config, errors, plugin subcommands."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from dsh_host import __version__
from dsh_host.testing import DshRunner
from tests.processes import dsh_command, hermetic_env


@pytest.fixture
def dsh(dsh_cli: DshRunner) -> DshRunner:
    """`dsh` with its data in tmp_path/data and the configured (or default) plugins mounted."""
    dsh_cli.home = dsh_cli.root / "data"
    dsh_cli.plugins = None
    return dsh_cli


def test_version(dsh):
    code, out, _ = dsh("--version")
    assert code == 0
    assert out.strip() == f"dsh {__version__}"


def test_global_options_are_read_once_before_the_command(dsh, tmp_path):
    (tmp_path / "chosen.toml").write_text('[host]\nplugins = ["retention"]\n')
    code, out, _ = dsh("--debug", "--config", str(tmp_path / "chosen.toml"), "config", "--json")
    assert code == 0
    assert json.loads(out)["file"] == str(tmp_path / "chosen.toml")
    code, out, _ = dsh(f"--config={tmp_path / 'chosen.toml'}", "--debug", "plugins", "--json")
    assert code == 0
    assert json.loads(out)["mounted"] == ["retention"]


def test_global_options_are_listed_in_help_and_not_as_group_options(dsh):
    code, out, _ = dsh("--help")
    assert code == 0
    assert "--config PATH  Read this configuration file." in out
    assert "--debug        Print tracebacks on errors." in out
    assert "--version      Print the version and exit." in out
    options = out.split("Options:", 1)[1].split("Commands:", 1)[0]
    assert options.split() == ["-h,", "--help", "Show", "this", "message", "and", "exit."]


def test_config_without_a_path_is_a_usage_error(dsh):
    code, _, err = dsh("--config")
    assert code == 2
    assert err == "dsh: error: Option '--config' requires an argument.\n"


def test_plugins_json_lists_installed_and_mounted(dsh):
    dsh.plugins = ["retention", "compact"]
    code, out, _ = dsh("plugins", "--json")
    assert code == 0
    out = json.loads(out)
    names = {p["name"]: p for p in out["installed"]}
    assert {"compact", "retention", "session-reference", "fs-read"} <= set(names)
    assert out["mounted"] == ["retention", "compact"]
    assert names["retention"]["mounted"] and "dsh_mount" in names["retention"]["hooks"]
    assert not names["session-reference"]["mounted"]


def test_config_json_shows_origins(dsh, tmp_path):
    (tmp_path / "dsh.toml").write_text('[host]\nmodel = "scripted"\nplugins = ["retention"]\n')
    code, out, _ = dsh("config", "--json")
    assert code == 0
    out = json.loads(out)
    assert out["file"] == str(tmp_path / "dsh.toml")
    assert out["origins"]["host.model"] == str(tmp_path / "dsh.toml")
    assert out["origins"]["models"] == "defaults"
    assert out["mounted"] == ["retention"]


def test_syntax_error_is_one_line_exit_2(dsh, tmp_path):
    (tmp_path / "dsh.toml").write_text("[host\n")
    code, _, err = dsh("plugins")
    assert code == 2
    assert err.startswith(f"dsh: error: {tmp_path / 'dsh.toml'}:1:")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "usage", "command"),
    [
        # The usage line's rest depends on click's version (`COMMAND` or `[COMMAND]`).
        (["--help"], "Usage: dsh [OPTIONS] ", "sessions"),
        (["-h"], "Usage: dsh [OPTIONS] ", "run"),
        (["sessions", "--help"], "Usage: dsh sessions [OPTIONS] ", "search"),
    ],
)
def test_help_works_with_a_configuration_that_does_not_parse(dsh, tmp_path, argv, usage, command):
    (tmp_path / "dsh.toml").write_text("[host\n")
    code, out, err = dsh(*argv)
    assert code == 0, err
    assert err == (
        f"dsh: note: {tmp_path / 'dsh.toml'}:1:6: Expected ']' at the end of a table declaration;"
        " showing the built-in commands only\n"
    )
    assert out.startswith(usage)
    assert command in out.split("Commands:\n", 1)[1].split()


def test_help_lists_the_built_in_commands_when_a_plugin_cannot_mount(dsh):
    dsh.plugins = ["nope"]
    code, out, err = dsh("--help")
    assert code == 0
    assert err.startswith("dsh: note: unknown plugin 'nope'") and len(err.splitlines()) == 1
    assert "sessions" in out.split("Commands:", 1)[1]


def test_a_bad_configuration_still_fails_a_command_that_is_not_help(dsh, tmp_path):
    (tmp_path / "dsh.toml").write_text("[host\n")
    code, _, err = dsh("sessions", "list", "--", "--help")
    assert code == 2 and err.startswith("dsh: error: ")


def test_the_chat_without_a_terminal_says_what_runs_without_one(tmp_path):
    env = hermetic_env(tmp_path, DSH_LOAD_PLUGINS="")
    for argv in ([], ["chat"]):
        done = subprocess.run(
            [*dsh_command(), *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, check=False
        )
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == 'dsh: error: the chat needs a terminal; `dsh run "PROMPT"` runs a turn without one\n'


def test_unknown_plugin_exit_2(dsh):
    dsh.plugins = ["nope"]
    code, _, err = dsh("plugins")
    assert code == 2
    assert "unknown plugin 'nope'" in err and "session-reference" in err


def test_bad_value_for_every_command(dsh, tmp_path):
    (tmp_path / "dsh.toml").write_text("[plugins.session-reference]\nmax_references = 4\n")
    for argv in (["plugins"], ["config"], ["sessions", "list"]):
        code, _, err = dsh(*argv)
        assert code == 2
        assert "[plugins.session-reference] max_references must be an integer in 1..3, got 4" in err


def test_usage_error_is_exit_2(dsh):
    code, _, err = dsh("sessions", "show")
    assert code == 2
    assert err.startswith("dsh: error:")


def test_plugin_adds_subcommand_through_dsh_register_commands(dsh, tmp_path, monkeypatch):
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
    dsh.plugins = ["hello"]
    code, out, _ = dsh("hello")
    assert code == 0
    assert out.strip() == "hello from a plugin"
    dsh.plugins = []
    assert dsh("hello").exit_code == 2  # not mounted: the command does not exist


def test_console_script_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "dsh_host.cli.main", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stdout.strip() == f"dsh {__version__}"
