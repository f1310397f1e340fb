"""The store reference keeps up with the code: every store operation (the optional lease and quick writes included)
has its row in docs/stores.md, and the page names none that is gone. (docs/hooks.md is generated:
tests/test_hook_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh_host import LeasingStore, QuickLeasingStore, SessionStore

DOCS = Path(__file__).resolve().parents[1] / "docs"
STORE_OPERATIONS = sorted(
    name
    for protocol in (SessionStore, LeasingStore, QuickLeasingStore)
    for name in vars(protocol)
    if not name.startswith("_") and callable(getattr(protocol, name))
)
STORE_ROWS = re.findall(r"^\| `(\w+)\(", (DOCS / "stores.md").read_text("utf-8"), re.M)


@pytest.mark.parametrize("operation", STORE_OPERATIONS)
def test_every_store_operation_has_a_row_in_docs_stores_md(operation):
    assert operation in STORE_ROWS, f"docs/stores.md has no row for the store operation {operation}"


def test_docs_stores_md_names_no_operation_that_is_gone():
    assert len(STORE_OPERATIONS) >= 12
    assert sorted(set(STORE_ROWS) - set(STORE_OPERATIONS)) == []
