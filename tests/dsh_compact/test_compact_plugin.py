"""The `compact` plugin on a real host: mounting, configuration errors, `dsh compact`, `/compact`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from dsh_compact import plugin
from dsh_compact.errors import CompactionError
from dsh_compact.listeners import AutoCompaction
from dsh_compact.service import CompactionService
from dsh_host.config import load_config
from dsh_host.errors import ConfigError, PluginError
from dsh_host.host import Host
from dsh_host.testing import DshRunner

SCRIPTED = {"provider": "scripted", "model": "scripted"}


@pytest.fixture
def dsh(dsh_cli: DshRunner) -> DshRunner:
    """`dsh` with compact mounted and its data where `start` keeps it; it reads tmp_path/dsh.toml."""
    dsh_cli.plugins = ["compact"]
    dsh_cli.home = dsh_cli.root / "data"
    return dsh_cli


def start(tmp_path: Path, toml: str = "") -> Host:
    # Through a dsh.toml file, as the command reads it: these tests compare the two.
    (tmp_path / "dsh.toml").write_text(toml)
    return Host.start(
        load_config(env={"DSH_HOME": str(tmp_path / "data"), "DSH_LOAD_PLUGINS": "compact"}, cwd=tmp_path)
    )


def test_mount_registers_the_service_and_the_triggers(tmp_path) -> None:
    with start(tmp_path, "[plugins.compact]\ncontext_window = 5000\nthreshold_ratio = 0.6\n") as host:
        service = host.services.compact
        assert isinstance(service, CompactionService)
        assert service.config.context_window == 5000
        assert service.config.threshold_ratio == 0.6
        listener = host.pm.get_plugin("compact.auto")
        assert isinstance(listener, AutoCompaction)
        assert {c.name for c in host.pm.get_hookcallers(listener)} == {
            "dsh_agent_post_step",
            "dsh_agent_request_error",
        }
        (mounted,) = host.mounted
        assert "dsh_agent_post_step" not in mounted.hooks  # the module itself never runs them
    assert host.pm.get_plugin("compact.auto") is None
    assert "compact" not in host.services


def test_auto_false_registers_no_trigger(tmp_path) -> None:
    with start(tmp_path, "[plugins.compact]\nauto = false\n") as host:
        assert host.services.compact.config.auto is False
        assert host.pm.get_plugin("compact.auto") is None
        assert host.hook.dsh_agent_post_step.get_hookimpls() == []


def test_two_hosts_have_their_own_triggers(tmp_path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = start(tmp_path / "a"), start(tmp_path / "b")
    try:
        assert first.pm.get_plugin("compact.auto") is not second.pm.get_plugin("compact.auto")
        first.close()
        assert second.pm.get_plugin("compact.auto") is not None
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("threshold_ratio = 2", "[plugins.compact] threshold_ratio must be a number in (0, 1], got 2"),
        ("thresold_ratio = 0.5", "[plugins.compact] unknown key 'thresold_ratio'"),
        ('auto = "no"', '[plugins.compact] auto must be true or false, got "no"'),
        (
            '[[plugins.compact.model_policies]]\nprovider = "p"\nmodel = "m"\nretain_tokens = -5',
            "[plugins.compact.model_policies[0]] retain_tokens must be an integer >= 0, got -5",
        ),
    ],
)
def test_configuration_errors_name_the_plugin_key_and_value(tmp_path, toml: str, message: str) -> None:
    header = "" if toml.startswith("[[") else "[plugins.compact]\n"
    with pytest.raises(PluginError) as info:
        start(tmp_path, header + toml)
    assert str(info.value).startswith("plugin 'compact': ")
    assert message in str(info.value)


def test_configuration_errors_exit_2_from_the_command_line(dsh, tmp_path) -> None:
    (tmp_path / "dsh.toml").write_text("[plugins.compact]\nmax_tokens = 0\n")
    code, _, err = dsh("plugins")
    assert code == 2
    assert err.startswith("dsh: error: plugin 'compact': [plugins.compact] max_tokens must be an integer >= 1, got 0")


# --- dsh compact SESSION_ID -----------------------------------------------------------------------


def stored_conversation(tmp_path: Path, fx, turns: int = 4, toml: str = "") -> str:
    """A closed conversation persisted in the store; returns its id."""

    async def build() -> str:
        with start(tmp_path, toml) as host:
            session = host.sessions.create(str(tmp_path))
            fx.conversation(turns, session=session, header={"header": {"config": SCRIPTED}, "reason": "initial"})
            session.append("turn/end", {"turn": turns + 1, "reason": {"kind": "completed"}})
            await host.sessions.flush(session)
            return session.id

    return asyncio.run(build())


def stored_events(tmp_path: Path, session_id: str) -> list:
    with start(tmp_path, (tmp_path / "dsh.toml").read_text()) as host:
        return list(host.store.read_events(session_id)[1])


def test_dsh_compact_compacts_a_stored_session(dsh, tmp_path, fx) -> None:
    toml = "[plugins.compact]\nretain_tokens = 180\n"
    session_id = stored_conversation(tmp_path, fx, toml=toml)
    stored = len(stored_events(tmp_path, session_id))
    (tmp_path / "dsh.toml").write_text(toml)
    code, out, _ = dsh("compact", session_id)
    assert code == 0
    events = stored_events(tmp_path, session_id)
    assert [e.type for e in events[stored:]] == [
        "turn/start",
        "compact/start",
        "compact/summary",
        "user/message",
        "compact/end",
        "turn/end",
    ]
    checkpoint = events[stored + 3].seq
    assert out == (
        f"session {session_id}: compacted 6 surface nodes (seqs 1-16, ~543 tokens) into checkpoint #{checkpoint}\n"
    )
    assert events[stored].data["trigger"] == {"kind": "compact", "source": {"kind": "user"}}
    summary = events[stored + 2].data
    assert (summary["provider"], summary["model"], summary["maxTokens"]) == ("scripted", "scripted", 8192)
    assert "## Primary Request and Intent" in summary["summary"][0]["text"]


def test_dsh_compact_with_nothing_to_compact(dsh, tmp_path, fx) -> None:
    session_id = stored_conversation(tmp_path, fx, turns=1)
    stored = len(stored_events(tmp_path, session_id))
    code, out, _ = dsh("compact", session_id, "--retain-tokens", "100000")
    assert code == 0
    assert out == f"session {session_id}: nothing to compact\n"
    assert len(stored_events(tmp_path, session_id)) == stored


def test_dsh_compact_reports_a_failure_on_one_line(dsh, tmp_path, fx) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "far too long " * 400}]))
    toml = f'[models.scripted]\nscript = "{script}"\n'
    session_id = stored_conversation(tmp_path, fx, toml=toml)
    (tmp_path / "dsh.toml").write_text(toml)
    code, _, err = dsh("compact", session_id, "--retain-tokens", "0")
    assert code == 1
    assert err.startswith("dsh: error: summary is not smaller than the shadowed content (")
    assert err.count("\n") == 1
    events = stored_events(tmp_path, session_id)
    assert [e.type for e in events[-3:]] == ["compact/start", "compact/end", "turn/end"]
    assert events[-1].data["reason"]["kind"] == "error"


@pytest.mark.parametrize("configured", ["scripted", "openai:deepseek-chat"])
def test_no_scripted_summary_is_written_for_a_real_model_without_its_key(dsh, tmp_path, fx, configured) -> None:
    # The session was driven by the real model; its key is not set now.
    dsh.env["DEEPSEEK_API_KEY"] = None
    toml = f'[host]\nmodel = "{configured}"\n[plugins.compact]\nretain_tokens = 180\n'
    real = {"header": {"config": {"provider": "openai", "model": "deepseek-chat"}}, "reason": "initial"}

    async def build() -> str:
        with start(tmp_path, toml) as host:
            session = host.sessions.create(str(tmp_path))
            fx.conversation(4, session=session, header=real)
            session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
            await host.sessions.flush(session)
            return session.id

    session_id = asyncio.run(build())
    stored = len(stored_events(tmp_path, session_id))
    code, _, err = dsh("compact", session_id)
    assert code == 1
    assert err == 'dsh: error: model "openai:deepseek-chat" needs an API key: set DEEPSEEK_API_KEY\n'
    written = stored_events(tmp_path, session_id)[stored:]
    assert "compact/summary" not in [e.type for e in written]
    assert all("Scripted" not in json.dumps(e.data) for e in written)


def test_dsh_compact_unknown_session(dsh) -> None:
    code, _, err = dsh("compact", "nope")
    assert code == 1
    assert err.startswith("dsh: error: ")


# --- /compact -------------------------------------------------------------------------------------


def test_slash_command_compacts_the_ui_session(tmp_path, fx) -> None:
    registered: dict = {}
    plugin.dsh_register_slash_commands(lambda name, help, handler: registered.setdefault(name, (help, handler)))
    _, handler = registered["compact"]

    async def run() -> tuple[str, str]:
        with start(tmp_path) as host:
            session = host.sessions.create(str(tmp_path))
            fx.conversation(4, session=session, header={"header": {"config": SCRIPTED}, "reason": "initial"})
            session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
            agent = SimpleNamespace(session=session, host=host, provider="scripted", model="x", status="idle")
            ui = SimpleNamespace(agent=agent)
            first = await handler(ui, " 0 ")
            with pytest.raises(ConfigError, match="/compact takes an optional number of tokens"):
                await handler(ui, "lots")
            agent.status = "running"
            before = session.seq
            with pytest.raises(CompactionError, match="the agent is busy"):
                await handler(ui, "")
            assert session.seq == before
            return first, session.id

    line, session_id = asyncio.run(run())
    assert line.startswith(f"session {session_id}: compacted 7 surface nodes")
