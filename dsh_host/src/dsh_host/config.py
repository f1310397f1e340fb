"""TOML configuration: search order, merge with built-in defaults, validation, provenance.

Search order for the configuration file: `--config PATH`, `$DSH_CONFIG`, `./dsh.toml`, the user
config dir (`platformdirs`), and otherwise built-in defaults only. The file found first is merged
over the defaults; each top-level key records where its value came from, which `dsh config`
prints. `DSH_LOAD_PLUGINS` and `DSH_HOME` override the file.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import platformdirs

from dsh_host.errors import ConfigError

DEFAULT_PLUGINS = ("fs-read", "retention", "compact", "session-reference", "acp", "mcp", "web")
"""The standard features: when no configuration names plugins, every installed plugin is mounted
(but stores, and those `[host] disable` names), these first, in this order, then the others by name."""

DEFAULTS: dict[str, Any] = {
    "host": {"model": "scripted"},
    "models": {
        "openai": {
            "base_url": "https://api.deepseek.com",
            "api_key_env": "DEEPSEEK_API_KEY",
            "model": "deepseek-chat",
        },
        "scripted": {},
    },
    "plugins": {},
    "stores": {},
    "sources": {},
}

DEFAULT_STORE = "sqlite"
"""The store used when `[host] store` is not set: the embedded SQLite file."""

_HOST_KEYS = {"plugins": list, "disable": list, "model": str, "data_dir": str, "store": str}
_MODEL_KEYS = {
    "openai": {
        "base_url": str,
        "api_key_env": str,
        "model": str,
        "max_retries": int,
        "timeout": float,
        "context_window": int,
    },
    "scripted": {"script": str, "context_window": int},
}
_TOP_KEYS = {"host", "models", "plugins", "sources", "stores"}
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)$")


@dataclass(frozen=True)
class Config:
    """The effective configuration and where each part came from."""

    data: Mapping[str, Any]
    origins: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def host(self) -> Mapping[str, Any]:
        return cast("Mapping[str, Any]", self.data["host"])

    @property
    def plugin_names(self) -> list[str] | None:
        """Plugins to mount, in order; None means "every installed plugin" (see `DEFAULT_PLUGINS`)."""
        return cast("list[str] | None", self.data["host"].get("plugins"))

    @property
    def disabled_plugins(self) -> list[str]:
        """Installed plugins left out (`[host] disable`), whatever else mounts."""
        return cast("list[str]", self.data["host"].get("disable", []))

    def where(self, key: str, value: str | None = None) -> str:
        """Where a `[host]` key was (or would be) set, for a message: `[host] KEY in PATH`, or the variable.

        A key the environment set names its variable (`DSH_LOAD_PLUGINS`); one set in code names
        the host's configuration; otherwise the configuration file in use, or `./dsh.toml`.
        With `value`, the setting reads `[host] KEY = "VALUE"`.
        """
        origin = self.origins.get(f"host.{key}", "defaults")
        if origin.startswith("env "):
            return origin.removeprefix("env ")
        setting = f"[host] {key}" if value is None else f"[host] {key} = {json.dumps(value, ensure_ascii=False)}"
        if origin == "code":
            return f"{setting} in the host's configuration"
        path = origin if origin != "defaults" else str(self.path) if self.path is not None else "./dsh.toml"
        return f"{setting} in {path}"

    def plugin_table(self, name: str) -> dict[str, Any]:
        """A copy of `[plugins.<name>]`, empty when absent."""
        return copy.deepcopy(dict(self.data["plugins"].get(name, {})))

    def model_table(self, provider: str) -> dict[str, Any]:
        """A copy of `[models.<provider>]`, empty when absent."""
        return copy.deepcopy(dict(self.data["models"].get(provider, {})))

    @property
    def store_name(self) -> str:
        """The store to open (`[host] store`, default `sqlite`)."""
        return cast(str, self.data["host"].get("store", DEFAULT_STORE))

    def store_table(self, name: str) -> dict[str, Any]:
        """A copy of `[stores.<name>]`, empty when absent."""
        return copy.deepcopy(dict(self.data["stores"].get(name, {})))

    def source_table(self, name: str) -> dict[str, Any]:
        """A copy of `[sources.<name>]`, empty when absent."""
        return copy.deepcopy(dict(self.data["sources"].get(name, {})))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], *, origin: str = "code") -> Config:
        """A configuration built in code: `mapping` has the shape of a `dsh.toml` file.

        It is merged over the built-in defaults and validated exactly as a file is (the same
        errors, naming `origin` where a file's would name its path). The environment is not
        consulted: a host composed in code says what it wants.
        """
        return _build(copy.deepcopy(dict(mapping)), origin, path=None)


def find_config_file(explicit: str | os.PathLike[str] | None, env: Mapping[str, str], cwd: Path) -> Path | None:
    """The configuration file to read, following the search order; None for defaults only."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        return path
    if env.get("DSH_CONFIG"):
        path = Path(env["DSH_CONFIG"])
        if not path.is_file():
            raise ConfigError(f"config file {path} (from DSH_CONFIG) does not exist")
        return path
    for candidate in (cwd / "dsh.toml", Path(platformdirs.user_config_dir("dsh")) / "dsh.toml"):
        if candidate.is_file():
            return candidate
    return None


def parse_toml_file(path: Path) -> dict[str, Any]:
    """Parse `path`; a syntax error names the file, line and column."""
    # Imported here: without a configuration file (the common case) no TOML is read.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_describe_toml_error(path, text, exc)) from None


def _describe_toml_error(path: Path, text: str, exc: Exception) -> str:
    message = str(exc)
    match = _TOML_POSITION.search(message)
    if match:
        line, col = match.group(1), match.group(2)
        what = message[: match.start()].strip()
    else:
        # "... (at end of document)": point past the last character.
        lines = text.split("\n")
        line, col = str(len(lines)), str(len(lines[-1]) + 1)
        what = re.sub(r"\s*\(at end of document\)$", "", message)
    return f"{path}:{line}:{col}: {what}"


def load_config(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Find, parse, merge and validate the configuration."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    path = find_config_file(explicit, env, cwd)
    config = _build(parse_toml_file(path) if path is not None else {}, str(path), path=path)
    data, origins = config.data, dict(config.origins)
    if "DSH_LOAD_PLUGINS" in env:
        data["host"]["plugins"] = [n.strip() for n in env["DSH_LOAD_PLUGINS"].split(",") if n.strip()]
        origins["host.plugins"] = "env DSH_LOAD_PLUGINS"
    if env.get("DSH_HOME"):
        data["host"]["data_dir"] = env["DSH_HOME"]
        origins["host.data_dir"] = "env DSH_HOME"
    return Config(data=data, origins=origins, path=path)


def _build(loaded: dict[str, Any], where: str, *, path: Path | None) -> Config:
    """`loaded` validated and merged over the defaults; each key's origin is `where`."""
    _validate_shape(loaded, where)
    data = copy.deepcopy(DEFAULTS)
    origins = dict.fromkeys(DEFAULTS, "defaults")
    for section, table in loaded.items():
        merged = data[section]
        for key, value in table.items():
            if section in ("models", "stores", "sources") and isinstance(value, dict):
                merged.setdefault(key, {}).update(value)
            else:
                merged[key] = value
            origins[f"{section}.{key}"] = where
    return Config(data=data, origins=origins, path=path)


def _validate_shape(loaded: Mapping[str, Any], path: str) -> None:
    for key, value in loaded.items():
        if key not in _TOP_KEYS:
            raise ConfigError(f"{path}: unknown table [{key}] (known: {', '.join(sorted(_TOP_KEYS))})")
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {key} must be a table, got {value!r}")
    host = loaded.get("host", {})
    for key, value in host.items():
        if key not in _HOST_KEYS:
            raise ConfigError(f"{path}: [host] unknown key {key!r} (known: {', '.join(sorted(_HOST_KEYS))})")
        _check_type("host", key, value, _HOST_KEYS[key], path)
    for key in ("plugins", "disable"):
        for name in host.get(key, []):
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{path}: [host] {key} entries must be non-empty strings, got {name!r}")
    for provider, table in loaded.get("models", {}).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [models.{provider}] must be a table, got {table!r}")
        known = _MODEL_KEYS.get(provider)
        if known is not None:
            for key, value in table.items():
                if key not in known:
                    raise ConfigError(f"{path}: [models.{provider}] unknown key {key!r}")
                _check_type(f"models.{provider}", key, value, known[key], path)
    for section in ("plugins", "stores", "sources"):
        for name, table in loaded.get(section, {}).items():
            if not isinstance(table, dict):
                raise ConfigError(f"{path}: [{section}.{name}] must be a table, got {table!r}")


def _check_type(table: str, key: str, value: object, expected: type, path: str) -> None:
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if expected is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        raise ConfigError(f"{path}: [{table}] {key} must be {expected.__name__}, got {value!r}")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("dsh"))
