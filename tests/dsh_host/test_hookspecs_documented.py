"""Every hook is documented (a docstring saying who calls it and what its result means) and
exercised by a test."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from dsh_host import hookspecs

ROOT = Path(__file__).resolve().parents[2]
HOOKS = [
    (name, fn)
    for name, fn in vars(hookspecs).items()
    if name.startswith("dsh_") and callable(fn) and hasattr(fn, "dsh_spec")
]


def test_there_are_hooks():
    assert len(HOOKS) >= 10


@pytest.mark.parametrize(("name", "fn"), HOOKS, ids=[n for n, _ in HOOKS])
def test_hook_has_a_docstring(name, fn):
    doc = inspect.getdoc(fn) or ""
    assert len(doc) > 40, f"{name} needs a docstring saying who calls it and what its result means"
    assert "Called by" in doc or "Called once" in doc or "Called when" in doc, f"{name}: say who calls it"


@pytest.mark.parametrize(("name", "fn"), HOOKS, ids=[n for n, _ in HOOKS])
def test_hook_is_exercised_by_a_test(name, fn):
    """Some test implements the hook (`def <hook>(` in a throwaway plugin) to call it through a host."""
    this = Path(__file__).resolve()
    users = [
        path
        for path in (ROOT / "tests").rglob("test_*.py")
        if path.resolve() != this and f"def {name}(" in path.read_text(encoding="utf-8")
    ]
    assert users, f"no test implements {name} in a throwaway plugin and calls it through the host"
