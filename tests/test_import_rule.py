"""The public-API rule: code outside dsh_host imports only `from dsh_host import <public name>`.

The plugins (dsh_compact, dsh_session_reference, dsh_retention, dsh_sources) and examples/ are what a plugin
or host author writes: they may not import `dsh_host.<submodule>` in any form, and what they
take from `dsh_host` must be one of its exported names (`dsh_host.__all__`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh_host

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = [
    ROOT / "dsh_compact" / "src",
    ROOT / "dsh_session_reference" / "src",
    ROOT / "dsh_retention" / "src",
    ROOT / "dsh_sources" / "src",
    ROOT / "examples",
]
SOURCES = sorted(path for folder in OUTSIDE for path in folder.rglob("*.py"))


def violations(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Each import in `path` that breaks the rule, as `file:line: what` (`file` relative to `root`)."""
    where = path.relative_to(root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dsh_host."):
                    yield f"{where}:{node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module.startswith("dsh_host."):
                yield f"{where}:{node.lineno}: from {node.module} import ..."
            elif node.module == "dsh_host":
                for alias in node.names:
                    if alias.name not in dsh_host.__all__:
                        yield f"{where}:{node.lineno}: from dsh_host import {alias.name} (not a public name)"


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


def test_the_rule_catches_every_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import dsh_host.config\n"
        "from dsh_host.host import Host\n"
        "from dsh_host import hookspecs\n"
        "from dsh_host import Host, hookimpl\n"
        "def later():\n"
        "    import dsh_host.cli.main as m\n"
    )
    assert list(violations(bad, tmp_path)) == [
        "bad.py:1: import dsh_host.config",
        "bad.py:2: from dsh_host.host import ...",
        "bad.py:3: from dsh_host import hookspecs (not a public name)",
        "bad.py:6: import dsh_host.cli.main",
    ]
