"""The README and docs/ make sense in a clone with nothing beside it: they name no path outside the
repository, every relative link resolves inside it, and docs/README.md indexes every page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    targets = (target.split("#", 1)[0] for target in LINK.findall(page.read_text(encoding="utf-8")))
    return [target for target in targets if target and not re.match(r"[a-z]+:", target)]


def test_no_page_names_a_path_outside_the_repository():
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            assert "../" not in line, f"{page.relative_to(ROOT)}:{number}: {line}"


def test_every_relative_link_resolves_inside_the_repository():
    for page in PAGES:
        for target in relative_links(page):
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{page.relative_to(ROOT)}: {target}"


def test_the_docs_index_links_every_page():
    linked = {(DOCS / target).resolve() for target in relative_links(DOCS / "README.md")}
    pages = {page.resolve() for page in DOCS.glob("*.md") if page.name != "README.md"}
    assert {"architecture.md", "plugins.md", "log-format.md"} <= {page.name for page in pages}
    assert pages <= linked, sorted(page.name for page in pages - linked)
