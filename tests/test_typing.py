"""The types a plugin author reads are real: checked strictly, `Any` kept for arbitrary JSON.

mypy itself runs in CI over every distribution (`[tool.mypy]` in pyproject.toml). These tests
keep that configuration honest and look from the outside, as a plugin author's checker does:
the docs' examples pass `mypy --strict` with dsh found the way an install finds it.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

from tests.public_api import PUBLIC_NAMESPACES
from tests.test_docs_examples import ALL, FILE_NAME

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("dsh_*/src"))

ANY_CEILING = 90
"""Lines of the distributions' sources that name `Any` (`grep -rw Any dsh_*/src --include='*.py'`).

What is left: configuration tables as TOML parsed them (`Mapping[str, Any]`), rows the database
drivers return (`tuple[Any, ...]`), futures whose result nobody reads (asyncio's `Future` is
invariant, so `object` would refuse a `Task[None]`), services looked up by name, and the
`JsonValue` alias itself. Arbitrary JSON is `dsh_host.hookspecs.JsonValue` or `Json`; anything
else gets its real type. Lower the ceiling when you remove one."""

PROBE = """\
from dsh_host import Agent, Event, Services


def services(agent: Agent) -> Services:
    return agent.host.services


def seq(event: Event) -> str:
    return event.seq
"""
"""Two uses of dsh's types: the first is right, the second wrong (an event's seq is an int)."""


def strict_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    strict = [o for o in config["overrides"] if o.get("disallow_untyped_defs")]
    assert len(strict) == 1, "one override holds the strict modules"
    return list(strict[0]["module"])


def test_every_module_that_defines_a_public_name_is_checked_strictly():
    patterns = strict_modules()
    homes = set(PUBLIC_NAMESPACES)
    for namespace in PUBLIC_NAMESPACES:
        for name in importlib.import_module(namespace).__all__:
            value = getattr(importlib.import_module(namespace), name)
            if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__.startswith("dsh_host"):
                homes.add(value.__module__)
    # As mypy reads a pattern: `a.*` is `a` and every module below it.
    loose = sorted(
        home
        for home in homes
        if not any(fnmatch.fnmatchcase(home, p) or (p.endswith(".*") and home == p[:-2]) for p in patterns)
    )
    assert loose == [], "add these modules to the strict override of [tool.mypy] in pyproject.toml"


def test_any_is_kept_for_what_really_is_arbitrary():
    word = re.compile(r"\bAny\b")
    lines = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in SOURCES
        for path in sorted(folder.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if word.search(line)
    ]
    assert len(lines) <= ANY_CEILING, (
        f"{len(lines)} lines name Any (ceiling {ANY_CEILING}): type JSON as dsh_host.hookspecs.JsonValue "
        "or Json, everything else with its real type"
    )


def test_the_docs_examples_pass_mypy_strict_as_a_plugin_authors_code(tmp_path):
    # The modules, tests and programs of the README and docs/, in a folder outside the
    # repository, with no configuration but --strict: dsh resolves through the installed
    # distributions (py.typed), as in a plugin author's project.
    written = ["probe_dsh_types.py"]
    (tmp_path / written[0]).write_text(PROBE, encoding="utf-8")
    for block in ALL:
        if block.kind == "excerpt":
            continue
        match = FILE_NAME.match(block.code)
        if match:
            name = match.group(1)
        else:
            page = re.sub(r"\W", "_", str(block.page.relative_to(ROOT)).removesuffix(".md"))
            name = f"{'test' if block.kind == 'test' else 'example'}_{page}_{block.line}.py"
        (tmp_path / name).write_text(block.code, encoding="utf-8")
        written.append(name)
    (tmp_path / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini", "--cache-dir", ".mypy_cache", *written],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'probe_dsh_types.py:9: error: Incompatible return value type (got "int", expected "str")  [return-value]'
    ], done.stdout + done.stderr
