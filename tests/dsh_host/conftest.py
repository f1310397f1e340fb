"""Fixtures shared by the host's tests."""

from __future__ import annotations

import pytest

from dsh_host.cli.main import main


@pytest.fixture
def dsh(tmp_path, monkeypatch, capsys):
    """Run `dsh ...` in-process against a DSH_HOME in tmp_path; returns (exit code, out, err)."""
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "")
    monkeypatch.delenv("DSH_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    run.home = home
    return run
