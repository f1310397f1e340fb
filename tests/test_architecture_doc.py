"""docs/architecture.md stays true to the code: its module tree lists every package and every
top-level module of each distribution (and nothing that is gone), and its dependency graph
between distributions is the one their imports make."""

from __future__ import annotations

import re
from pathlib import Path

from tests.architecture import DISTRIBUTIONS, ROOT, code_block, imports, sources

SRC_FOLDERS = sorted(ROOT.glob("*/src"))


def packages() -> set[str]:
    """Every folder with an `__init__.py` under a `src/` folder, as a path from the repository root."""
    return {
        str(init.parent.relative_to(ROOT)) + "/"
        for src in SRC_FOLDERS
        for init in src.rglob("__init__.py")
        if ".egg-info" not in str(init)
    }


def top_level_modules() -> set[str]:
    """Every module at the top of a distribution's package (but `__init__.py`), from the repository root."""
    return {
        str(path.relative_to(ROOT))
        for src in SRC_FOLDERS
        for init in src.glob("*/__init__.py")
        for path in init.parent.glob("*.py")
        if path.name != "__init__.py"
    }


def tree(lines: list[str]) -> tuple[set[str], set[str]]:
    """The folders and modules a module tree names, as paths from the repository root.

    A line's indentation (two spaces a level) places it in the folder named on the nearest
    shallower line; a line names either one folder (`name/`) or some modules (`a.py b.py`), then
    says what they are.
    """
    folders: set[str] = set()
    modules: set[str] = set()
    open_folders: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        del open_folders[depth:]
        words = line.split()
        if words[0].endswith("/"):
            folder = "".join(open_folders) + words[0]
            folders.add(folder)
            open_folders.append(words[0])
        else:
            for word in words:
                if not re.fullmatch(r"\w+\.py", word):
                    break
                modules.add("".join(open_folders) + word)
    return folders, modules


def documented_dependencies() -> dict[str, set[str]]:
    """Each distribution's documented dependencies: `name -> a, b` (or `(none)`) per line."""
    graph: dict[str, set[str]] = {}
    for line in code_block("Dependencies between distributions"):
        name, _, targets = (part.strip() for part in line.partition("->"))
        graph[name] = set() if targets == "(none)" else {target.strip() for target in targets.split(",")}
    return graph


def imported_distributions(name: str) -> set[str]:
    """The other distributions a distribution's sources import, in any form."""
    package_dir = DISTRIBUTIONS[name]
    return {
        found.name.split(".")[0]
        for path in sources(package_dir)
        for found in imports(path, type_checking=True)
        if found.name.split(".")[0] in DISTRIBUTIONS and found.name.split(".")[0] != name
    }


def test_every_package_and_top_level_module_is_in_the_module_tree():
    folders, modules = tree(code_block("Where the code is"))
    assert sorted(packages() - folders) == [], "docs/architecture.md: add these packages to the module tree"
    assert sorted(top_level_modules() - modules) == [], "docs/architecture.md: add these modules to the module tree"


def test_the_module_tree_names_nothing_that_is_gone():
    folders, modules = tree(code_block("Where the code is"))
    missing = [path for path in sorted(folders | modules) if not (ROOT / path).exists()]
    assert missing == [], "docs/architecture.md: the module tree names what is not there"


def test_the_distributions_are_the_ones_the_check_knows():
    assert {str(path.relative_to(ROOT)) for path in DISTRIBUTIONS.values()} == {
        str(init.parent.relative_to(ROOT)) for src in SRC_FOLDERS for init in src.glob("*/__init__.py")
    }


def test_the_dependency_graph_between_distributions_is_the_imports():
    documented = documented_dependencies()
    assert set(documented) == set(DISTRIBUTIONS)
    actual = {name: imported_distributions(name) for name in DISTRIBUTIONS}
    assert documented == actual


def test_the_tree_reader_places_folders_and_modules(tmp_path: Path):
    lines = [
        "a/src/a/",
        "  x.py y.py          what they are",
        "  sub/               a package",
        "    deep/            a package in it",
        "  z.py               back in a",
        "b/src/b/",
        "  w.py",
    ]
    folders, modules = tree(lines)
    assert folders == {"a/src/a/", "a/src/a/sub/", "a/src/a/sub/deep/", "b/src/b/"}
    assert modules == {"a/src/a/x.py", "a/src/a/y.py", "a/src/a/z.py", "b/src/b/w.py"}
