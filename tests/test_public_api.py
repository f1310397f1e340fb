"""The public surface of dsh_host: small, documented, typed, cheap to import, and old names kept."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import dsh_host
from tests.public_api import PUBLIC_NAMESPACES

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "docs" / "api.md"
PUBLIC = [(namespace, name) for namespace in PUBLIC_NAMESPACES for name in importlib.import_module(namespace).__all__]
HEAVY = ("rich", "prompt_toolkit", "httpx", "psycopg", "acp", "mcp", "starlette", "uvicorn", "jinja2", "markdown_it")


def test_the_top_level_is_a_surface_a_reader_can_hold_in_their_head():
    # The types of what a host and an agent hand out (`host.sessions`, `agent.status`) count too.
    assert 35 <= len(dsh_host.__all__) <= 50
    assert sorted(dsh_host.__all__) == sorted(set(dsh_host.__all__))


def test_the_top_level_names_are_listed_once_and_mirrored_for_type_checkers():
    import ast

    # `_HOMES` is the one list; `__all__` is made from it; a type checker reads the names from
    # the `TYPE_CHECKING` imports, which must say the same (each `from HOME import NAME as NAME`).
    homes = dsh_host._HOMES
    assert dsh_host.__all__ == sorted(["__version__", "hookimpl", *homes])
    tree = ast.parse(Path(dsh_host.__file__).read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    mirrored = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names:
            assert alias.asname == alias.name, f"import {alias.name} as itself, so mypy sees it exported"
            mirrored[alias.name] = node.module
    assert mirrored == homes


def test_every_deprecated_name_says_which_release_removes_it():
    page = API_PAGE.read_text(encoding="utf-8")
    assert f"Until dsh-host {dsh_host.SHIMS_REMOVED_IN}, which removes them" in page
    for name, (_, new_name) in dsh_host._DEPRECATED.items():
        with pytest.warns(DeprecationWarning, match=rf"it goes in dsh-host {re.escape(dsh_host.SHIMS_REMOVED_IN)}$"):
            getattr(dsh_host, name)
        assert f"`{name}`" in page or new_name is not None, name


@pytest.mark.parametrize(("namespace", "name"), PUBLIC, ids=[f"{ns}.{n}" for ns, n in PUBLIC])
def test_every_public_name_resolves_and_has_a_docstring(namespace, name):
    value = getattr(importlib.import_module(namespace), name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert (value.__doc__ or "").strip(), f"{namespace}.{name} needs a docstring"


@pytest.mark.parametrize(("namespace", "name"), PUBLIC, ids=[f"{ns}.{n}" for ns, n in PUBLIC])
def test_every_public_name_has_its_place_in_docs_api_md(namespace, name):
    page = API_PAGE.read_text(encoding="utf-8")
    section = page.split(f"## `{namespace}`", 1)
    assert len(section) == 2, f"docs/api.md has no section for {namespace}"
    body = section[1].split("\n## ", 1)[0]
    assert re.search(rf"`{re.escape(name)}[`(]", body), f"docs/api.md does not describe {namespace}.{name}"


def test_each_public_name_has_one_public_home():
    homes: dict[int, list[str]] = {}
    for namespace, name in PUBLIC:
        value = getattr(importlib.import_module(namespace), name)
        if inspect.isclass(value) or inspect.isfunction(value):
            homes.setdefault(id(value), []).append(f"{namespace}.{name}")
    assert [places for places in homes.values() if len(places) > 1] == []


def test_a_name_that_moved_still_works_with_a_warning_naming_its_new_home():
    from dsh_host.settings import format_value
    from dsh_host.text import js_trim

    with pytest.warns(DeprecationWarning, match=r"dsh_host\.js_trim is deprecated: use dsh_host\.text\.js_trim"):
        assert dsh_host.js_trim is js_trim
    with pytest.warns(DeprecationWarning, match=r"use dsh_host\.settings\.format_value"):
        from dsh_host import show
    assert show is format_value
    with pytest.warns(DeprecationWarning, match="internal"):
        assert dsh_host.DROPPED == "dropped"


def test_a_public_name_is_not_a_deprecation():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in dsh_host.__all__:
            getattr(dsh_host, name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = dsh_host.nothing_here  # type: ignore[attr-defined]


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_importing_dsh_host_loads_no_ui_agent_network_or_database_library():
    loaded = _loaded_after("import dsh_host")
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
    assert "dsh_host.agent.agent" not in loaded and "asyncio" not in loaded


def test_the_ui_namespace_is_where_rich_comes_in():
    assert "rich" in {m.split(".")[0] for m in _loaded_after("import dsh_host.ui")}


def test_the_package_is_typed():
    for folder in sorted(p.parent for p in ROOT.glob("dsh_*/src/dsh_*/__init__.py")):
        assert (folder / "py.typed").is_file(), f"{folder.relative_to(ROOT)} ships no py.typed"
