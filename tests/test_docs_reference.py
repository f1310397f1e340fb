"""The reference pages keep up with the code: every hook has its section in docs/hooks.md (with its
signature) and every store operation its row in docs/stores.md, and neither names one that is gone."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from dsh_host import SessionStore, hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs"
HOOKS = {
    name: ", ".join(inspect.signature(fn).parameters)
    for name, fn in vars(hookspecs).items()
    if name.startswith("dsh_") and callable(fn) and hasattr(fn, "dsh_spec")
}
HOOK_SECTIONS = dict(re.findall(r"^### `(dsh_\w+)\((.*)\)`$", (DOCS / "hooks.md").read_text("utf-8"), re.M))
STORE_OPERATIONS = sorted(
    name for name in vars(SessionStore) if not name.startswith("_") and callable(getattr(SessionStore, name))
)
STORE_ROWS = re.findall(r"^\| `(\w+)\(", (DOCS / "stores.md").read_text("utf-8"), re.M)


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hook_has_a_section_with_its_signature_in_docs_hooks_md(name):
    assert name in HOOK_SECTIONS, f"docs/hooks.md has no '### `{name}({HOOKS[name]})`' section"
    assert HOOK_SECTIONS[name] == HOOKS[name], f"docs/hooks.md: {name} takes ({HOOKS[name]})"


def test_docs_hooks_md_names_no_hook_that_is_gone():
    assert sorted(set(HOOK_SECTIONS) - set(HOOKS)) == []


@pytest.mark.parametrize("operation", STORE_OPERATIONS)
def test_every_store_operation_has_a_row_in_docs_stores_md(operation):
    assert operation in STORE_ROWS, f"docs/stores.md has no row for SessionStore.{operation}"


def test_docs_stores_md_names_no_operation_that_is_gone():
    assert len(STORE_OPERATIONS) >= 12
    assert sorted(set(STORE_ROWS) - set(STORE_OPERATIONS)) == []
