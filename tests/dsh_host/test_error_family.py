"""One error family: every error a user can see is a `DshError`, and library code prints nothing."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_compact.errors import SummarizationError
from dsh_compact.pairing import ToolPairingError
from dsh_host import ConfigError, DshError, PluginError
from dsh_host.cli.stderr import QUIET_LIBRARIES
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.log import InvalidEvent, InvalidLog, NotLosslessJson, SurfaceError
from dsh_host.models import ModelFailure
from dsh_session_reference import ErrorCode, SessionReferenceError
from tests.public_api import PUBLIC_NAMESPACES

LIBRARIES = ("dsh_host", "dsh_compact", "dsh_session_reference")

# Control flow inside one component: caught there and turned into a result, never raised to a
# caller of the public API, so they stay plain exceptions.
INTERNAL = {
    "dsh_host.agent.loop.TurnInterrupted": "becomes an `aborted` or `disposed` turn end",
    "dsh_host.agent.loop.ModelRequestFailed": "becomes an `error` turn end",
    "dsh_host.tui.file_search.FileSearchCancelled": "a superseded file search in the terminal UI",
    "dsh_host.store.sqlite.connection.WriterBusy": "a quick write declining: `append_now` returns False",
}


def _modules() -> Iterator[object]:
    for name in LIBRARIES:
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            yield importlib.import_module(info.name)


def _error_classes() -> dict[str, type[BaseException]]:
    found = {}
    for module in _modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not value.__name__.startswith("_")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_error_class_of_the_libraries_is_a_dsh_error() -> None:
    classes = _error_classes()
    assert set(INTERNAL) <= set(classes)  # the exemptions name classes that still exist
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, DshError) and name not in INTERNAL)
    assert outside == []


def test_the_errors_have_a_public_home() -> None:
    """The errors a caller catches are at the top; the log's and the models' in their namespaces."""
    homes = {name: importlib.import_module(name) for name in PUBLIC_NAMESPACES}
    errors = {
        f"{home}.{name}" if home != "dsh_host" else name
        for home, module in homes.items()
        for name in module.__all__
        if isinstance(getattr(module, name), type) and issubclass(getattr(module, name), BaseException)
    }
    top = {"ComposeError", "ConfigError", "DshError", "PluginError", "SearchCancelled", "SessionNotFound", "StoreError"}
    elsewhere = {"dsh_host.log.InvalidEvent", "dsh_host.log.InvalidLog", "dsh_host.log.NotLosslessJson"}
    assert top | elsewhere | {"dsh_host.log.SurfaceError", "dsh_host.models.ModelFailure"} <= errors
    for name in errors:
        home, _, attr = name.rpartition(".")
        assert issubclass(getattr(homes[home or "dsh_host"], attr), DshError), name


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (InvalidEvent, ValueError),
        (SurfaceError, ValueError),
        (InvalidLog, ValueError),
        (ToolPairingError, ValueError),
        (NotLosslessJson, TypeError),
    ],
)
def test_errors_long_caught_as_a_builtin_type_still_are(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, DshError) and issubclass(error, builtin)
    raised = error("bad input")
    assert (str(raised), raised.code) == ("bad input", None)


def test_a_dsh_error_has_a_message_and_an_optional_code() -> None:
    assert DshError("plain").code is None
    coded = DshError("session mentions could not be prepared", code="FEATURE_FAILED")
    assert (str(coded), coded.code, coded.exit_code) == ("session mentions could not be prepared", "FEATURE_FAILED", 1)
    assert ConfigError("x").exit_code == PluginError("x").exit_code == 2


def test_feature_errors_carry_their_codes() -> None:
    reference = SessionReferenceError(ErrorCode.TOO_MANY, "a message may reference at most 3 sessions")
    assert isinstance(reference, DshError)
    assert (reference.code, str(reference), reference.message) == (
        "SESSION_REFERENCE_TOO_MANY",
        "a message may reference at most 3 sessions",
        "a message may reference at most 3 sessions",
    )
    assert (
        repr(reference)
        == "SessionReferenceError('SESSION_REFERENCE_TOO_MANY', 'a message may reference at most 3 sessions')"
    )
    assert ModelFailure("slow down", "RATE_LIMIT", status=429).code == "RATE_LIMIT"
    assert SummarizationError("no checkpoint", "SERVER_ERROR").code == "SERVER_ERROR"
    assert SummarizationError("no checkpoint").code is None


@pytest.mark.parametrize(
    ("plugin", "line", "message"),
    [
        ("retention", "max_bytes = 10", "[plugins.retention] unknown key 'max_bytes'"),
        ("compact", "max_tokens = 0", "[plugins.compact] max_tokens must be an integer >= 1, got 0"),
        (
            "session-reference",
            'candidate_limit = "7"',
            '[plugins.session-reference] candidate_limit must be an integer >= 1, got "7"',
        ),
    ],
)
def test_plugin_configuration_errors_are_config_errors_naming_table_key_and_value(
    tmp_path: Path, plugin: str, line: str, message: str
) -> None:
    (tmp_path / "dsh.toml").write_text(f"[plugins.{plugin}]\n{line}\n")
    env = {"DSH_HOME": str(tmp_path / "data"), "DSH_LOAD_PLUGINS": plugin}
    with pytest.raises(PluginError) as info:
        Host.start(load_config(env=env, cwd=tmp_path))
    assert str(info.value) == f"plugin {plugin!r}: {message}"
    assert isinstance(info.value.__cause__, ConfigError)
    assert str(info.value.__cause__) == message


# --- library code is quiet ----------------------------------------------------------------------

SOURCES = [Path(importlib.import_module(name).__file__).parent for name in (*LIBRARIES, "dsh_retention")]


def _is_command_line(path: Path) -> bool:
    """The `dsh` command, the terminal UI and a plugin's command module write to the terminal."""
    parts = path.parts
    return path.name == "cli.py" or ("dsh_host" in parts and ("cli" in parts or "tui" in parts))


def _library_files() -> list[Path]:
    files = [path for root in SOURCES for path in sorted(root.rglob("*.py")) if not _is_command_line(path)]
    assert len(files) > 50
    return files


def _writes_to_the_terminal(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, name = node.value.id, node.attr
            if (owner == "sys" and name in {"stdout", "stderr", "__stdout__", "__stderr__"}) or (
                (owner, name) in {("click", "echo"), ("click", "secho"), ("traceback", "print_exc")}
            ):
                lines.append(node.lineno)
    return lines


def test_no_library_module_prints_or_writes_to_stdout_or_stderr() -> None:
    found = {}
    for path in _library_files():
        lines = _writes_to_the_terminal(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[str(path)] = lines
    assert found == {}


def test_every_logger_is_named_under_dsh() -> None:
    names = {}
    unnamed = []
    for root in SOURCES:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "getLogger"
                ):
                    [argument] = node.args
                    if isinstance(argument, ast.Constant):
                        names[f"{path.name}:{node.lineno}"] = argument.value
                    else:
                        unnamed.append(path.name)
    assert names
    # The only logger not named by a literal: the command line quieting other libraries' loggers.
    assert unnamed == ["stderr.py"]
    assert not [name for name in QUIET_LIBRARIES if name == "dsh" or name.startswith("dsh.")]
    # `dsh` itself only where the command line installs its handler for all of them.
    assert {where: name for where, name in names.items() if not name.startswith("dsh.")} == {
        where: "dsh" for where in names if where.startswith("stderr.py:")
    }
