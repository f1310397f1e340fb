"""Every hook implementation in this repository agrees with its specification's parameters.

pluggy checks only that an implementation's argument names are among the hook's; this test also
compares the annotations, as written, with the specification's, so a plugin's signature says
what the host really passes. The distributions' sources and examples/ annotate every parameter
and the result; tests' throwaway plugins may leave annotations out, but what they write must
match too.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hook_docs import hook_specs

ROOT = Path(__file__).resolve().parents[1]
SPECS = hook_specs()
STRICT = [*sorted(ROOT.glob("dsh_*/src")), ROOT / "examples"]
LENIENT = [ROOT / "tests", ROOT / "bench"]


@dataclass(frozen=True)
class Implementation:
    where: str
    name: str
    params: dict[str, str | None]
    returns: str | None
    strict: bool


def normalized(annotation: str) -> str:
    """An annotation as text, without quotes, spaces or the qualifying module of a public name."""
    text = annotation.replace('"', "").replace("'", "").replace(" ", "")
    return re.sub(r"\b(?:dsh_host\.(?:hookspecs\.|ui\.|models\.|log\.)?|hookspecs\.)", "", text)


def _is_hookimpl(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Name) and target.id == "hookimpl") or (
        isinstance(target, ast.Attribute) and target.attr == "hookimpl"
    )


def implementations() -> Iterator[Implementation]:
    for folders, strict in ((STRICT, True), (LENIENT, False)):
        for path in sorted(p for folder in folders for p in folder.rglob("*.py") if "node_modules" not in p.parts):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name not in SPECS:
                    continue
                if not any(_is_hookimpl(d) for d in node.decorator_list):
                    continue
                args = [a for a in node.args.args if a.arg not in ("self", "cls")]
                yield Implementation(
                    where=f"{path.relative_to(ROOT)}:{node.lineno}",
                    name=node.name,
                    params={a.arg: ast.unparse(a.annotation) if a.annotation else None for a in args},
                    returns=ast.unparse(node.returns) if node.returns else None,
                    strict=strict,
                )


IMPLEMENTATIONS = list(implementations())


def test_the_repository_has_implementations_of_most_hooks():
    assert len({i.name for i in IMPLEMENTATIONS if i.strict}) >= 15
    assert len(IMPLEMENTATIONS) >= 100


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=[f"{i.name}@{i.where}" for i in IMPLEMENTATIONS])
def test_the_implementation_takes_the_hooks_parameters_with_its_types(impl: Implementation):
    spec = inspect.signature(SPECS[impl.name])
    unknown = sorted(set(impl.params) - set(spec.parameters))
    assert unknown == [], f"{impl.where}: {impl.name} has no parameter(s) {unknown}"
    for name, annotation in impl.params.items():
        if annotation is None:
            assert not impl.strict, f"{impl.where}: {impl.name}({name}) is not annotated"
            continue
        expected = str(spec.parameters[name].annotation)
        assert normalized(annotation) == normalized(expected), (
            f"{impl.where}: {impl.name}({name}: {annotation}), the hook passes {expected}"
        )
    if impl.strict:
        assert impl.returns is not None, f"{impl.where}: {impl.name} has no return annotation"
