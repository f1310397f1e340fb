"""The code examples of the README and docs/ run as written, and import only public names.

Each ```python block of a page is one of:

- a module, when its first line names a file (`# dsh_words.py`): written to that file, so the
  page's other blocks can import it;
- a test module, when it defines `test_` functions: run by pytest in pytest-asyncio's default
  (strict) mode, with dsh_host's fixtures, as a plugin author's suite would run it;
- an excerpt, when its first line is `# excerpt...`: it names things defined elsewhere, so it
  is only compiled;
- a program, anything else: run with Python, in a directory of its own.

Every block, excerpts included, imports only what a plugin author may import.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_import_rule import violations

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("dsh_*/README.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
FILE_NAME = re.compile(r"# (\w+\.py)\n")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str

    @property
    def kind(self) -> str:
        if FILE_NAME.match(self.code):
            return "module"
        if self.code.startswith("# excerpt") or self.page.name == "hooks.md":
            return "excerpt"
        if re.search(r"^(async )?def test_", self.code, re.M):
            return "test"
        return "program"

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


ALL = [block for page in PAGES for block in blocks(page)]
RUNNABLE_PAGES = sorted({block.page for block in ALL if block.kind in ("test", "program")})


def test_the_pages_have_examples_of_every_kind():
    assert {block.kind for block in ALL} == {"module", "test", "excerpt", "program"}


@pytest.mark.parametrize("block", ALL, ids=[block.where for block in ALL])
def test_every_example_compiles_and_imports_only_public_names(block, tmp_path):
    compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    source = tmp_path / "example.py"
    source.write_text(block.code, encoding="utf-8")
    assert list(violations(source, tmp_path)) == [], block.where


def _hermetic_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PYTEST_"))}
    env.update(
        DSH_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PYTHONPATH=str(tmp_path),
    )
    return env


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE_PAGES])
def test_the_examples_of_a_page_run_as_written(page, tmp_path):
    env = _hermetic_env(tmp_path)
    page_blocks = blocks(page)
    for block in page_blocks:
        if block.kind == "module":
            name = FILE_NAME.match(block.code).group(1)  # type: ignore[union-attr]
            (tmp_path / name).write_text(block.code, encoding="utf-8")
    tests = [block for block in page_blocks if block.kind == "test"]
    for number, block in enumerate(tests):
        (tmp_path / f"test_example_{number}.py").write_text(block.code, encoding="utf-8")
    if tests:
        # A configuration of its own, so this repository's (asyncio_mode = "auto") does not apply.
        (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, f"{[b.where for b in tests]}:\n{done.stdout}\n{done.stderr}"
    for block in page_blocks:
        if block.kind == "program":
            workdir = tmp_path / f"program_{block.line}"
            workdir.mkdir()
            done = subprocess.run(
                [sys.executable, "-c", block.code], capture_output=True, text=True, cwd=workdir, env=env, timeout=120
            )
            assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr}"
