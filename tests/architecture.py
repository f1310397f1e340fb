"""What the architecture tests read: the imports of the sources, and docs/architecture.md.

An import is any import statement of a module, at its top or inside a function; those under
`if TYPE_CHECKING:` are read only when asked for. `from a import b, c` names `a.b` and `a.c`
(each may be a module or a name defined in `a`); relative imports are made absolute.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DISTRIBUTIONS = {
    "dsh_retention": ROOT / "dsh_retention" / "src" / "dsh_retention",
    "dsh_host": ROOT / "dsh_host" / "src" / "dsh_host",
    "dsh_compact": ROOT / "dsh_compact" / "src" / "dsh_compact",
    "dsh_session_reference": ROOT / "dsh_session_reference" / "src" / "dsh_session_reference",
    "dsh_sources": ROOT / "dsh_sources" / "src" / "dsh_sources",
}


@dataclass(frozen=True)
class Import:
    """One name an import statement brings in: where it stands and the dotted name it imports."""

    path: Path
    line: int
    name: str

    def __str__(self) -> str:
        where = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{where}:{self.line}: imports {self.name}"


def module_name(path: Path) -> str:
    """The dotted module name of a source file (or package folder) below a `src/` folder."""
    parts = list(path.with_suffix("").parts)
    parts = parts[len(parts) - parts[::-1].index("src") :]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, type_checking: bool) -> Iterator[Import]:
    """Every name the imports of `path` (a source file below a `src/` folder) bring in, anywhere in it.

    `type_checking`: include the imports under `if TYPE_CHECKING:`, which only a type checker runs.
    """
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in _nodes(ast.parse(path.read_text(encoding="utf-8"), str(path)), type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                yield Import(path, node.lineno, f"{module}.{alias.name}" if alias.name != "*" else module)


def _nodes(tree: ast.AST, type_checking: bool) -> Iterator[ast.AST]:
    """Every node of `tree`, but the bodies of `if TYPE_CHECKING:` unless `type_checking`."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(reversed(node.orelse))
            continue
        pending.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def sources(package_dir: Path) -> list[Path]:
    return sorted(package_dir.rglob("*.py"))


# -- docs/architecture.md ------------------------------------------------------------------------


def section(title: str) -> str:
    """The text of the `## title` section of docs/architecture.md."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/architecture.md has no section '## {title}'"
    return match.group(1)


def code_block(title: str) -> list[str]:
    """The lines of the first fenced code block of a section."""
    match = re.search(r"^```\n(.*?)^```", section(title), re.M | re.S)
    assert match, f"docs/architecture.md: section '## {title}' has no code block"
    return match.group(1).splitlines()
