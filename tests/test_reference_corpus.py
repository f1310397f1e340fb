"""Without the reference logs the tests that read them skip with one reason naming where they were
looked for, and fail instead when `DSH_REQUIRE_REFERENCE_LOGS` is set (as `.ci/run` sets it).

Each case runs one corpus module in a child pytest pointed at an empty folder, so the answer does
not depend on whether this machine has the corpus.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Two plain corpus tests and one parametrized by the logs and the store (without the logs, one
# `corpus-missing` case per store).
MODULE = "tests/dsh_host/test_jsonl_reference_logs.py"


def run_without_corpus(empty: Path | None, **extra: str) -> subprocess.CompletedProcess[str]:
    """The corpus module run with `DSH_REFERENCE_LOGS_DIR` naming `empty` (None: unset)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DSH_", "PYTEST_"))}
    if empty is not None:
        env["DSH_REFERENCE_LOGS_DIR"] = str(empty)
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", MODULE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_missing_corpus_skips_its_tests_saying_where_it_was_looked_for(tmp_path):
    done = run_without_corpus(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 skipped" in done.stdout and "passed" not in done.stdout and "error" not in done.stdout
    reason = f"reference logs missing: no *.jsonl in {tmp_path} (from $DSH_REFERENCE_LOGS_DIR)"
    assert done.stdout.count(reason) == 3, done.stdout  # -rs folds the two store cases into one line


def test_without_the_variable_the_skip_reason_says_to_set_it():
    done = run_without_corpus(None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 skipped" in done.stdout and "passed" not in done.stdout
    reason = "reference logs missing: set $DSH_REFERENCE_LOGS_DIR to the directory that holds them"
    assert done.stdout.count(reason) == 3, done.stdout


def test_a_missing_corpus_fails_when_it_is_required(tmp_path):
    done = run_without_corpus(tmp_path, DSH_REQUIRE_REFERENCE_LOGS="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "4 errors" in done.stdout and "skipped" not in done.stdout
    assert "DSH_REQUIRE_REFERENCE_LOGS is set, so they are required" in done.stdout
