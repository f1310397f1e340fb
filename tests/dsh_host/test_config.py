"""Configuration: search order, syntax and type errors, provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_host.config import load_config
from dsh_host.errors import ConfigError


def test_defaults_when_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr("platformdirs.user_config_dir", lambda name: str(tmp_path / "nowhere"))
    config = load_config(env={}, cwd=tmp_path)
    assert config.path is None
    assert config.host["model"] == "scripted"
    assert config.plugin_names is None


def test_search_order(tmp_path, monkeypatch):
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    (user_dir / "dsh.toml").write_text('[host]\nmodel = "user"\n')
    monkeypatch.setattr("platformdirs.user_config_dir", lambda name: str(user_dir))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    assert load_config(env={}, cwd=cwd).host["model"] == "user"
    (cwd / "dsh.toml").write_text('[host]\nmodel = "local"\n')
    assert load_config(env={}, cwd=cwd).host["model"] == "local"
    env_file = tmp_path / "env.toml"
    env_file.write_text('[host]\nmodel = "env"\n')
    assert load_config(env={"DSH_CONFIG": str(env_file)}, cwd=cwd).host["model"] == "env"
    explicit = tmp_path / "explicit.toml"
    explicit.write_text('[host]\nmodel = "explicit"\n')
    config = load_config(explicit, env={"DSH_CONFIG": str(env_file)}, cwd=cwd)
    assert config.host["model"] == "explicit"
    assert config.origins["host.model"] == str(explicit)


def test_load_plugins_switch_and_home_override(tmp_path):
    (tmp_path / "dsh.toml").write_text('[host]\nplugins = ["compact"]\n')
    config = load_config(env={"DSH_LOAD_PLUGINS": "retention, fs-read", "DSH_HOME": "/x"}, cwd=tmp_path)
    assert config.plugin_names == ["retention", "fs-read"]
    assert config.origins["host.plugins"] == "env DSH_LOAD_PLUGINS"
    assert config.host["data_dir"] == "/x"
    assert load_config(env={"DSH_LOAD_PLUGINS": ""}, cwd=tmp_path).plugin_names == []


def test_syntax_error_names_file_line_and_column(tmp_path):
    path = tmp_path / "dsh.toml"
    path.write_text('[host]\nmodel = "x"\nplugins = [\n  "a" "b"\n]\n')
    with pytest.raises(ConfigError) as info:
        load_config(env={}, cwd=tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}:4:")
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[host]\nmodel = 3\n", "[host] model must be str, got 3"),
        ("[host]\nplugins = [1]\n", "plugins entries must be non-empty strings"),
        ("[host]\nbogus = 1\n", "[host] unknown key 'bogus'"),
        ("[nope]\n", "unknown table [nope]"),
        ("[models.openai]\nbase_url = 1\n", "[models.openai] base_url must be str, got 1"),
        ("plugins = 1\n", "plugins must be a table"),
    ],
)
def test_type_errors_name_the_key(tmp_path: Path, toml: str, needle: str):
    (tmp_path / "dsh.toml").write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_config(env={}, cwd=tmp_path)
    assert needle in str(info.value)


def test_missing_explicit_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml", env={}, cwd=tmp_path)
