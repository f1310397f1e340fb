"""Fixtures: the agents' folders in a temporary home, and hosts mounting the two sources on them."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_host import Host
from dsh_host.testing import HostFactory
from dsh_sources.build import end_idle_workers


@pytest.fixture(autouse=True)
def no_idle_workers():
    """Worker processes a test's build leaves for the next build end with the test (each test starts its own)."""
    yield
    end_idle_workers()


@dataclass(frozen=True)
class AgentDirs:
    """Where the test's Claude Code and Codex keep their data."""

    claude: Path
    codex: Path

    def tables(self) -> dict[str, Any]:
        return {"claude-code": {"dir": str(self.claude)}, "codex": {"dir": str(self.codex)}}


@pytest.fixture
def agent_dirs(tmp_path: Path) -> AgentDirs:
    return AgentDirs(tmp_path / "claude", tmp_path / "codex")


SourceHost = Callable[..., Host]


@pytest.fixture
def source_host(make_host: HostFactory, agent_dirs: AgentDirs) -> SourceHost:
    """`source_host(*more_plugins)`: a host mounting `claude-code` and `codex` on `agent_dirs`."""
    return lambda *more: make_host(["claude-code", "codex", *more], config={"sources": agent_dirs.tables()})


def tree_state(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file and folder under `root` with its bytes, mtime and mode (what reading must not change)."""
    state: dict[str, tuple[bytes, int, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            data = path.read_bytes() if path.is_file() else b""
            state[str(path.relative_to(root))] = (data, info.st_mtime_ns, info.st_mode)
    return state


@pytest.fixture(scope="module")
def monkeypatch_module():
    """A monkeypatch for a whole module's tests (hypothesis runs many examples in one test call)."""
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture
def opencode_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `opencode` entry point, as `pip install ./dsh_sources` makes it (a dist-info on `sys.path`)."""
    site = tmp_path / "site"
    info = site / "dsh_opencode_entry-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-opencode-entry\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dsh]\nopencode = dsh_sources.opencode\n")
    monkeypatch.syspath_prepend(str(site))
