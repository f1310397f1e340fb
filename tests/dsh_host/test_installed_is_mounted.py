"""Installed is mounted: with no plugin list every installed plugin mounts (but stores, and what
`[host] disable` names), and a command of an installed plugin that is not mounted says, in one
line, which setting of which file would mount it (from entry-point metadata, importing nothing).

The plugin `demo` and the store plugin `store-demo` are a distribution made here, on `sys.path`:
an installed package as `importlib.metadata` sees one.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import click
import pytest

from dsh_host.builtins import dsh_register_commands as register_builtins
from tests.dsh_sources.builders import ClaudeTranscript

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

DEMO = """
import click
from dsh_host import hookimpl

@hookimpl
def dsh_register_commands(cli):
    @click.command()
    def hello():
        click.echo("hello from demo")

    cli.add_command(hello)
"""


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dsh_cli):
    site = tmp_path / "site"
    info = site / "dsh_demo-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[dsh]\ndemo = dsh_demo_plugin\nstore-demo = dsh_demo_store\n\n"
        "[dsh.commands]\nhello = dsh_demo_plugin\ndemostore = dsh_demo_store\n"
    )
    (site / "dsh_demo_plugin.py").write_text(DEMO)
    (site / "dsh_demo_store.py").write_text("raise ImportError('a store plugin is imported only when chosen')\n")
    monkeypatch.syspath_prepend(str(site))
    for name in ("dsh_demo_plugin", "dsh_demo_store"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    dsh_cli.plugins = None  # no DSH_LOAD_PLUGINS: the configuration (or its absence) decides
    return dsh_cli


def test_with_no_list_every_installed_plugin_but_stores_is_mounted(demo):
    code, out, err = demo("plugins")
    assert (code, err) == (0, "")
    order = out.splitlines()[-1].removeprefix("mount order: ").split(", ")
    assert order[:7] == ["fs-read", "retention", "compact", "session-reference", "acp", "mcp", "web"]
    # The sources of dsh-sources (claude-code, codex, gemini-cli, ...) as installed, and the demo.
    sources = {ep.name for ep in metadata.distribution("dsh-sources").entry_points if ep.group == "dsh"}
    assert {"claude-code", "codex"} <= sources
    assert set(order[7:]) == sources | {"demo"} and order[7:] == sorted(order[7:])
    assert "store-demo" not in order and "store-postgres" not in order
    assert demo("hello") == (0, "hello from demo\n", "")


def test_installed_sources_show_their_sessions_with_no_configuration(demo):
    # What a person sees after `pip install ./dsh_sources`: Claude Code's sessions, listed.
    t = ClaudeTranscript(cwd="/work")
    t.user("where is the parser?")
    t.reply(("text", "In lines.py."))
    t.write(demo.root / "user-home" / ".claude")
    code, out, err = demo("sessions", "list")
    assert (code, err) == (0, "")
    assert f"claude-code:{t.session_id}  " in out and out.rstrip().endswith("Claude Code · where is the parser?")


def test_disable_leaves_a_plugin_out_and_its_command_says_how_to_mount_it(demo):
    config = demo.root / "dsh.toml"
    config.write_text('[host]\ndisable = ["demo", "claude-code"]\n')
    order = demo("plugins").stdout.splitlines()[-1]
    assert "demo" not in order and "claude-code" not in order and "codex" in order
    assert demo("hello") == (
        2,
        "",
        'dsh: error: command "hello" belongs to plugin "demo", installed but not mounted: '
        f'remove "demo" from [host] disable in {config}\n',
    )


def test_an_explicit_list_still_restricts_and_names_its_file_or_variable(demo):
    config = demo.root / "dsh.toml"
    config.write_text('[host]\nplugins = ["fs-read"]\n')
    assert demo("hello") == (
        2,
        "",
        'dsh: error: command "hello" belongs to plugin "demo", installed but not mounted: '
        f'add "demo" to [host] plugins in {config}\n',
    )
    demo.plugins = ["fs-read"]
    assert demo("hello").stderr == (
        'dsh: error: command "hello" belongs to plugin "demo", installed but not mounted: '
        'add "demo" to DSH_LOAD_PLUGINS\n'
    )


def test_a_store_plugin_mounts_only_when_chosen_and_its_command_says_so(demo):
    assert demo("demostore") == (
        2,
        "",
        'dsh: error: command "demostore" belongs to plugin "store-demo", installed but not mounted: '
        'set [host] store = "demo" in ./dsh.toml\n',
    )


def test_other_unknown_commands_and_disabled_names_stay_plain_errors(demo):
    code, _, err = demo("nosuch")
    assert (code, err) == (2, "dsh: error: No such command 'nosuch'.\n")
    (demo.root / "dsh.toml").write_text('[host]\ndisable = ["nope"]\n')
    code, _, err = demo("sessions", "list")
    assert code == 2 and err.startswith("dsh: error: unknown plugin 'nope' in [host] disable; installed plugins: ")


def _added_commands(register) -> set[str]:
    cli = click.Group()
    register_builtins(cli=cli)
    builtin = set(cli.commands)
    register(cli=cli)
    return set(cli.commands) - builtin


@pytest.mark.parametrize("folder", ["dsh_host", "dsh_compact", "dsh_session_reference", "dsh_sources", "dsh_retention"])
def test_each_first_party_plugin_declares_the_commands_it_adds(folder):
    import importlib

    entry_points = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]["entry-points"]
    declared = entry_points.get("dsh.commands", {})
    for plugin, module_name in entry_points["dsh"].items():
        module = importlib.import_module(module_name)
        register = getattr(module, "dsh_register_commands", None)
        added = _added_commands(register) if register is not None else set()
        assert {command for command, owner in declared.items() if owner == module_name} == added, plugin
