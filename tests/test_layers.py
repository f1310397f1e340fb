"""dsh_host's layers, as docs/architecture.md writes them down, hold in the code.

Each package and top-level module of dsh_host (a "unit"; the package's own `__init__.py`, the
public API, is the unit `dsh_host`) stands in one layer. A module imports only units of its own
layer or a lower one, and the imports between units never run in a circle. Every import that
runs counts, at the top of a module or inside a function; one under `if TYPE_CHECKING:` does
not (only a type checker runs it, and annotations may name a type of any layer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tests.architecture import DISTRIBUTIONS, Import, imports, module_name, section, sources

HOST = DISTRIBUTIONS["dsh_host"]


def documented_layers() -> dict[str, int]:
    """Each unit's layer, from the table of `## Layers inside dsh_host`."""
    layers: dict[str, int] = {}
    for number, units in re.findall(r"^\| (\d+) \| ([^|]+) \|", section("Layers inside dsh_host"), re.M):
        for unit in re.findall(r"`(\w+)`", units):
            assert unit not in layers, f"docs/architecture.md puts {unit} in two layers"
            layers[unit] = int(number)
    return layers


def units(package_dir: Path) -> set[str]:
    """The units of a package: its subpackages and top-level modules, and the package itself."""
    found = {path.stem for path in package_dir.glob("*.py") if path.name != "__init__.py"}
    found |= {path.parent.name for path in package_dir.glob("*/__init__.py")}
    return found | {package_dir.name}


def unit_of(name: str, package_dir: Path) -> str | None:
    """The unit of `package_dir` a dotted name belongs to (None for a name outside the package)."""
    package = module_name(package_dir)
    if name != package and not name.startswith(package + "."):
        return None
    child = name[len(package) + 1 :].split(".")[0]
    if child and ((package_dir / child).is_dir() or (package_dir / f"{child}.py").exists()):
        return child
    return package_dir.name  # the package itself, or a name its __init__.py exports


def unit_of_path(path: Path, package_dir: Path) -> str:
    relative = path.relative_to(package_dir)
    return package_dir.name if relative == Path("__init__.py") else relative.parts[0].removesuffix(".py")


def edges(package_dir: Path) -> Iterator[tuple[str, str, Import]]:
    """(importing unit, imported unit, the import) for every import between two units."""
    for path in sources(package_dir):
        here = unit_of_path(path, package_dir)
        for found in imports(path, type_checking=False):
            there = unit_of(found.name, package_dir)
            if there is not None and there != here:
                yield here, there, found


def layer_violations(package_dir: Path, layers: Mapping[str, int]) -> list[str]:
    """Each import from a unit into a higher layer's, described."""
    return [
        f"{found}: {there} (layer {layers[there]}) from {here} (layer {layers[here]})"
        for here, there, found in edges(package_dir)
        if layers[there] > layers[here]
    ]


def circles(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one unit (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_unit_of_dsh_host_has_exactly_one_documented_layer():
    layers = documented_layers()
    assert sorted(units(HOST) - set(layers)) == [], "docs/architecture.md: give these a layer"
    assert sorted(set(layers) - units(HOST)) == [], "docs/architecture.md: these are gone"


def test_no_module_of_dsh_host_imports_a_higher_layer():
    assert layer_violations(HOST, documented_layers()) == []


def test_the_two_stores_share_only_what_lies_below_them():
    store = HOST / "store"
    layers = {
        "base": 1,
        "codec": 1,
        "rows": 1,
        "search": 1,
        "registry": 1,
        "leases": 1,
        "relevance": 1,
        "pages": 1,
        "sqlite": 2,
        "postgres": 2,
        "store": 3,
    }
    assert units(store) == set(layers)
    assert layer_violations(store, layers) == []
    assert [str(i) for here, there, i in edges(store) if {here, there} == {"sqlite", "postgres"}] == []


def test_no_circle_between_the_units_of_dsh_host():
    found = list(edges(HOST))
    groups = circles((here, there) for here, there, _ in found)
    details = [[str(i) for here, there, i in found if here in group and there in group] for group in groups]
    assert groups == [], details


def test_the_check_sees_every_form_of_import_that_runs(tmp_path):
    package = tmp_path / "src" / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.high import thing\n")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "mod.py").write_text(
        "import typing\n"
        "import pkg.high\n"
        "from pkg import high\n"
        "from pkg import Public\n"
        "from .. import high as again\n"
        "if typing.TYPE_CHECKING:\n"
        "    from pkg.high import Thing\n"
        "else:\n"
        "    from pkg.high import Other\n"
        "def later():\n"
        "    from pkg.high.deep import x\n"
    )
    (package / "high.py").write_text("from pkg.low.mod import later\n")
    layers = {"pkg": 3, "high": 2, "low": 1}
    assert units(package) == set(layers)
    violations = layer_violations(package, layers)
    assert [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in violations] == ["2", "3", "4", "5", "9", "11"]
    assert violations[2].endswith("imports pkg.Public: pkg (layer 3) from low (layer 1)")
    assert circles((here, there) for here, there, _ in edges(package)) == [["high", "low", "pkg"]]
    typed = [i.line for i in imports(package / "low" / "mod.py", type_checking=True) if i.name.startswith("pkg.")]
    assert typed == [2, 3, 4, 5, 7, 9, 11]


def test_the_json_vocabulary_is_a_leaf_that_dsh_host_imports_directly():
    # `Json`, `JsonValue` and `MaybeAwaitable` live in `jsontypes`, which imports nothing of dsh:
    # a module that only types JSON names no hook specification (nor, through it, every layer).
    vocabulary = {"Json", "JsonValue", "MaybeAwaitable"}
    leaf = HOST / "jsontypes.py"
    assert [found for found in imports(leaf, type_checking=True) if found.name.startswith("dsh_host")] == []
    through_hookspecs = [
        str(found)
        for path in sources(HOST)
        if path.name != "hookspecs.py"
        for found in imports(path, type_checking=True)
        if found.name.rpartition(".")[0] == "dsh_host.hookspecs" and found.name.rpartition(".")[2] in vocabulary
    ]
    assert through_hookspecs == []
