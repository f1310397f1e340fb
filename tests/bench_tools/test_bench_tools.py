"""The bench's own tools: absolute figures, the corpus command line, memory summed over a process tree, and
the four-agent sources bench and its child processes at a tiny size."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.corpus import generate
from bench.process_tree import descendants, run_measured, tree_rss_mb
from bench.timing import Figure
from dsh_host.testing import private_homes

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


FOUR_AGENT_FIGURES = {
    f"sources4_{name}"
    for name in (
        "cold_build_2gb",
        "cold_build_peak_rss",
        "cold_build_rss_doubling",
        "mcp_first_search_cold_home",
        "list_10k_warm",
        "search_10k_warm",
        "read_surface_gemini_125mb_warm",
        "read_surface_gemini_125mb_bytes_read",
        "read_surface_opencode_125mb_warm",
        "read_surface_opencode_125mb_bytes_read",
    )
}


def _run_sources_bench(tmp_path: Path, agents: str) -> subprocess.CompletedProcess[bytes]:
    """`python -m bench sources` at a tiny size with `agents`, in private homes under `tmp_path`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env.update(
        private_homes(tmp_path / "home"),
        DSH_HOME=str(tmp_path / "dsh"),
        DSH_BENCH_SOURCES_AGENTS=agents,
        DSH_BENCH_SOURCES_GB="0.004",
        DSH_BENCH_SOURCES_ROUNDS="1",
        TMPDIR=str(tmp_path),
    )
    return subprocess.run([sys.executable, "-m", "bench", "sources"], cwd=ROOT, env=env, capture_output=True)


def test_the_four_agent_sources_bench_measures_every_figure_over_all_four_sources(tmp_path: Path) -> None:
    done = _run_sources_bench(tmp_path, "4")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    figures = {figure["name"]: figure for figure in map(json.loads, done.stdout.splitlines())}
    assert set(figures) == FOUR_AGENT_FIGURES
    assert all(figure["value"] > 0 and figure["baseline"] > 0 for figure in figures.values())
    build = figures["sources4_cold_build_2gb"]["note"]
    for said in ("all 4 indexes", "25 files and an OpenCode database of", "30 sessions"):
        assert said in build
    assert "largest file the OpenCode database" in figures["sources4_cold_build_peak_rss"]["note"]
    assert "of the 3 planted sessions" in figures["sources4_mcp_first_search_cold_home"]["note"]
    assert "OpenCode session" in figures["sources4_read_surface_opencode_125mb_warm"]["note"]
    assert "Gemini CLI session" in figures["sources4_read_surface_gemini_125mb_warm"]["note"]
    assert not (tmp_path / "home").exists()  # nothing looked for (or made) an agent's real home


def test_a_number_of_agents_other_than_two_or_four_is_refused_in_one_line(tmp_path: Path) -> None:
    refused = _run_sources_bench(tmp_path, "3")
    assert refused.returncode == 1 and refused.stdout == b""
    assert refused.stderr.decode().splitlines() == ["DSH_BENCH_SOURCES_AGENTS must be 2 or 4, not '3'"]


def test_the_bare_loop_decodes_every_line_and_database_row_and_leaves_the_database_alone(tmp_path: Path) -> None:
    corpus = generate(tmp_path / "home", gb=0.002, gemini_gb=0.001, opencode_gb=0.001)
    assert corpus.opencode is not None
    database = Path(corpus.opencode.database)
    before = sorted(os.listdir(database.parent)), database.stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-m", "bench.source_build", "bare", corpus.root], cwd=ROOT, capture_output=True, check=True
    )
    counted = json.loads(done.stdout)
    lines = sum(len(path.read_bytes().splitlines()) for path in (tmp_path / "home").rglob("*.jsonl"))
    with sqlite3.connect(f"file:{database}?mode=ro&immutable=1", uri=True) as conn:
        (rows,) = conn.execute("SELECT (SELECT count(*) FROM message) + (SELECT count(*) FROM part)").fetchone()
        (sessions,) = conn.execute("SELECT count(*) FROM session").fetchone()
    assert (counted["files"], counted["databases"]) == (corpus.files, 1)
    assert (counted["records"], counted["rows"]) == (lines + rows, sessions)
    assert (sorted(os.listdir(database.parent)), database.stat().st_mtime_ns) == before


def test_a_build_naming_no_known_source_is_refused_with_its_usage(tmp_path: Path) -> None:
    for pairs in (["nonsense=/x"], ["codex"], ["codex=/x", "codex=/y"], []):
        refused = subprocess.run(
            [sys.executable, "-m", "bench.source_build", "build", str(tmp_path / "data"), *pairs],
            cwd=ROOT,
            capture_output=True,
        )
        assert refused.returncode == 2, pairs
        assert refused.stderr.decode().startswith("usage: python -m bench.source_build (build DATA ")
    assert not (tmp_path / "data").exists()
