"""The bench's own tools: absolute figures, the corpus command line, and memory summed over a process tree."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.process_tree import descendants, run_measured, tree_rss_mb
from bench.timing import Figure

ROOT = Path(__file__).resolve().parents[2]


def test_an_absolute_figure_is_met_by_its_value_and_a_ratio_figure_by_its_ratio() -> None:
    within = Figure("rss", 120.0, 40.0, unit="MB", target=150.0, absolute=True).as_json()
    over = Figure("rss", 151.0, 400.0, unit="MB", target=150.0, absolute=True).as_json()
    ratio = Figure("rss_doubling", 120.0, 100.0, unit="MB", target=1.1).as_json()
    assert (within["met"], within["ratio"], over["met"], ratio["met"]) == (True, 3.0, False, False)


def test_the_corpus_command_writes_and_describes_a_home_and_refuses_bad_sizes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.corpus", str(tmp_path / "home"), "--gb", "0.002", "--seed", "5"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    described = json.loads(done.stdout)
    assert described["files"] == len(list((tmp_path / "home").rglob("*.jsonl"))) == 20
    assert described["bytes"] == sum(path.stat().st_size for path in (tmp_path / "home").rglob("*.jsonl"))
    assert len(described["planted"]) == 3
    refused = subprocess.run(
        [sys.executable, "-m", "bench.corpus", str(tmp_path / "other"), "--gb", "0"], cwd=ROOT, capture_output=True
    )
    assert refused.returncode == 2
    assert refused.stderr.decode().strip().splitlines()[-1].endswith("--gb must be positive, not 0.0")
    too_big = subprocess.run(
        [sys.executable, "-m", "bench.corpus", str(tmp_path / "other"), "--gb", "0.01", "--big-claude-gb", "0.01"],
        cwd=ROOT,
        capture_output=True,
    )
    assert too_big.returncode == 2 and not (tmp_path / "other").exists()
    assert (
        too_big.stderr.decode()
        .strip()
        .splitlines()[-1]
        .endswith("each big file must be positive and smaller than its agent's share of 0.01 GB")
    )


# A child that starts a grandchild; each holds MEGABYTES of touched memory, and the grandchild
# says so once both hold it, then both wait for their input to end.
_TREE = textwrap.dedent(
    """
    import subprocess, sys
    held = b"x" * (int(sys.argv[1]) * 1_000_000)
    if sys.argv[2] == "parent":
        child = subprocess.Popen([sys.executable, __file__, sys.argv[1], "child"], stdin=subprocess.PIPE)
        sys.stdin.read()
        child.stdin.close()
        child.wait()
    else:
        print("holding", flush=True)
        sys.stdin.read()
    """
)


def test_tree_memory_counts_every_descendant(tmp_path: Path) -> None:
    script = tmp_path / "tree.py"
    script.write_text(_TREE)
    parent = subprocess.Popen(
        [sys.executable, str(script), "60", "parent"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"holding\n"
        members = descendants(parent.pid)
        assert len(members) == 2 and members[0] == parent.pid
        assert tree_rss_mb(parent.pid) > 120
    finally:
        assert parent.stdin is not None
        parent.stdin.close()
        parent.wait()


def test_a_measured_run_reports_its_output_peak_and_time_and_a_failure_names_its_error() -> None:
    run = run_measured([sys.executable, "-c", "held = b'x' * 50_000_000; print('done')"])
    assert run.stdout == b"done\n" and run.peak_mb > 50 and run.wall > 0 and run.cpu > 0
    with pytest.raises(RuntimeError, match="no such corpus"):
        run_measured([sys.executable, "-c", "raise SystemExit('no such corpus')"])
