"""The public-API rule: code outside dsh_host imports only public names, and uses only the host's public attributes.

The plugins (dsh_compact, dsh_session_reference, dsh_retention, dsh_sources) and examples/ are what a plugin
or host author writes: what they take from `dsh_host` must be one of its exported names
(`dsh_host.__all__`) or a public sub-namespace, and what they take from a public sub-namespace
must be in its `__all__`; any other `dsh_host.<submodule>` is private. Of a `Host` (a value named
`host`, `self.host`, `self._host` or `agent.host`) they use only the attributes docs/api.md lists
(`host.<name>`). bench/ may reach further: it measures private baselines.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh_host
from tests.public_api import PUBLIC_NAMESPACES

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = [
    ROOT / "dsh_compact" / "src",
    ROOT / "dsh_session_reference" / "src",
    ROOT / "dsh_retention" / "src",
    ROOT / "dsh_sources" / "src",
    ROOT / "examples",
]
SOURCES = sorted(path for folder in OUTSIDE for path in folder.rglob("*.py"))
API_PAGE = ROOT / "docs" / "api.md"


def documented_host_attributes() -> set[str]:
    """The attributes of `Host` docs/api.md lists, as `host.<name>`."""
    return set(re.findall(r"`(?:await )?host\.([A-Za-z_]\w*)", API_PAGE.read_text(encoding="utf-8")))


def _is_host(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "host"
    return isinstance(node, ast.Attribute) and node.attr in ("host", "_host")


def attribute_violations(path: Path, documented: set[str], root: Path = ROOT) -> Iterator[str]:
    """Each use of a host attribute docs/api.md does not list, as `file:line: host.<name>`."""
    where = path.relative_to(root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute) and _is_host(node.value) and node.attr not in documented:
            yield f"{where}:{node.lineno}: host.{node.attr}"


def violations(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Each import in `path` that breaks the rule, as `file:line: what` (`file` relative to `root`)."""
    where = path.relative_to(root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dsh_host.") and alias.name not in PUBLIC_NAMESPACES:
                    yield f"{where}:{node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "dsh_host":
                for alias in node.names:
                    if alias.name not in dsh_host.__all__ and f"dsh_host.{alias.name}" not in PUBLIC_NAMESPACES:
                        yield f"{where}:{node.lineno}: from dsh_host import {alias.name} (not a public name)"
            elif node.module in PUBLIC_NAMESPACES:
                public = importlib.import_module(node.module).__all__
                for alias in node.names:
                    if alias.name not in public:
                        yield f"{where}:{node.lineno}: from {node.module} import {alias.name} (not a public name)"
            elif node.module.startswith("dsh_host."):
                yield f"{where}:{node.lineno}: from {node.module} import ..."


def test_there_are_sources_to_check():
    assert {folder.name if folder.name != "src" else folder.parent.name for folder in OUTSIDE} == {
        "dsh_compact",
        "dsh_session_reference",
        "dsh_retention",
        "dsh_sources",
        "examples",
    }
    assert all(any(path.is_relative_to(folder) for path in SOURCES) for folder in OUTSIDE)


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_only_the_public_api_of_dsh_host_is_imported(path):
    assert list(violations(path)) == []


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_only_documented_attributes_of_the_host_are_used(path):
    assert list(attribute_violations(path, documented_host_attributes())) == []


def test_the_attribute_rule_catches_every_receiver(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(host, agent, self):\n"
        "    host.services.get('x')\n"
        "    host.pm.register(object())\n"
        "    agent.host._plugin_objects\n"
        "    self._host.sources.names\n"
        "    self.host.mounted\n"
    )
    documented = documented_host_attributes()
    assert {"services", "pm", "sources", "sessions", "models", "data_dir"} <= documented
    assert list(attribute_violations(bad, documented, tmp_path)) == [
        "bad.py:4: host._plugin_objects",
        "bad.py:6: host.mounted",
    ]


def test_the_rule_catches_every_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import dsh_host.config\n"
        "from dsh_host.host import Host\n"
        "from dsh_host import builtins\n"
        "from dsh_host import Host, hookimpl, ui\n"
        "from dsh_host.text import js_trim, _EPOCH\n"
        "import dsh_host.log\n"
        "def later():\n"
        "    import dsh_host.cli.main as m\n"
    )
    assert list(violations(bad, tmp_path)) == [
        "bad.py:1: import dsh_host.config",
        "bad.py:2: from dsh_host.host import ...",
        "bad.py:3: from dsh_host import builtins (not a public name)",
        "bad.py:5: from dsh_host.text import _EPOCH (not a public name)",
        "bad.py:8: import dsh_host.cli.main",
    ]
