"""Session-source benchmarks at the sizes heavy users keep: gigabytes of other agents' sessions.

The corpus is written once per run by `bench.corpus` (format-faithful sessions made from
synthesized records; most bytes are tool output): about `DSH_BENCH_SOURCES_GB` GB (default 2;
0.1 for a quick run). `DSH_BENCH_SOURCES_ROUNDS` (default 3) sets the rounds of the costly
figures. `DSH_BENCH_SOURCES_AGENTS` picks which agents (2 unless set; any other value than 2 or 4
is refused in one line):

- 2 (issue 37's bench, its figures as they always were): 55 % Claude Code and 45 % Codex, one
  Claude Code transcript of a quarter of it (500 MB at 2 GB, records under 8 MB, a few of several
  MB), one Codex rollout of 17.5 % (350 MB), and 5,000 small sessions per GB (10,000 at 2 GB),
  with `claude-code` and `codex` mounted. Its figures are listed below.
- 4 (issue 39's: the four agents together): the same total spread as half Claude Code and Codex
  (split 55/45 as above, so a 250 MB transcript and a 175 MB rollout at 2 GB), a quarter Gemini
  CLI JSON lines (its big session a quarter of that: 125 MB) and a quarter one OpenCode database
  (its big session likewise about 125 MB of rows), about 10,000 sessions in all at 2 GB, with all
  four sources mounted. Its figures are those below named `sources4_` for `sources_`, with the
  same goals: the cold-build three (`sources4_cold_build_2gb`, whose bare loop also opens the
  OpenCode database and decodes every message and part row's JSON once; `..._peak_rss`;
  `..._rss_doubling`, where the largest file is the database: it is written again with its big
  session longer by the database's size), `sources4_mcp_first_search_cold_home`, the warm
  `sources4_list_10k_warm` and `sources4_search_10k_warm`, and the warm reads of the big
  Gemini CLI and OpenCode sessions (`sources4_read_surface_gemini_125mb_warm`,
  `sources4_read_surface_opencode_125mb_warm` and their `_bytes_read`). The warm reads of the
  big transcript and rollout and the read after an append are the two-agent run's (those
  sources read them the same way whoever else is mounted).

The sources are driven through the public API only: a host mounting the sources on the corpus.
A build is `build_index()` where the source is a `dsh_host.sources.IndexedSource`, else a
listing (which refreshes the index).

- `sources_cold_build_2gb`: a cold build of both sources' indexes (a fresh data dir each round,
  in a child process) against the bare loop (a child process that reads every corpus file and
  decodes every line with the JSON decoder the sources use), page cache warm, alternating
  rounds; each side times its own work (interpreter start-up and imports left out). Goal <= 1.0.
  The note gives the build process's CPU seconds over its wall seconds (its child processes
  included): above 1 when it uses both cores.
- `sources_cold_build_peak_rss`: the cold build's peak RSS summed over its process tree (sampled
  every 10 ms), in MB, beside the bare loop's. Absolute goal <= 150 MB.
- `sources_cold_build_rss_doubling`: the same peak with the largest file twice as long against
  the peak of the corpus as it is. Goal <= 1.10 (memory bounded by the largest record, not file).
- `mcp_first_search_cold_home`: `dsh mcp` on a home of the corpus with an empty index (fresh
  DSH_HOME): seconds from sending `search_sessions` to its answer, beside a second search right
  after. Absolute goal <= 5 s.
- `sources_list_10k_warm`: the query service's `list_sessions` over the corpus's sessions, index
  warm, against the same over a store holding the same conversations (imported from the
  sources' `read_events`). Goal <= 1.5.
- `sources_search_10k_warm`: the query service's `search_candidates` of a topic about 1 session
  in 50 is about, likewise: a different topic each call, in the same order on both sides (the
  sources keep an index file's latest answers while it is unwritten, and a repeated query would
  measure that). Goal <= 1.5.
- `sources_read_surface_500mb_warm`: `read_surface` of the big transcript, index warm, against
  the store's `read_surface` of the same surface imported. Goal <= 1.5.
- `sources_read_surface_500mb_bytes_read`: the bytes this process read (`rchar` of
  /proc/self/io) during one such warm read, in MB: an upper bound of what was read of the
  transcript, since it counts the index's reads too. Absolute goal < 4 MB.
- `sources_read_surface_codex_350mb_warm` and `sources_read_surface_codex_350mb_bytes_read`: the
  same two for the big Codex rollout (350 MB at 2 GB). Goals <= 1.5 and < 4 MB.
- `sources_read_surface_after_append_1mb`: each round appends a fresh 1 MB of turns chained onto
  the big transcript's last record, then `read_surface` (which must see them) against the
  warm read plus a cold read of a separate 1 MB transcript (a fresh host and data dir). Goal
  <= 1.3.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.corpus import (
    PLANTED_PHRASE,
    SEARCH_TOPIC,
    TOPICS,
    Corpus,
    SessionFile,
    append_claude,
    double_largest,
    generate,
    write_claude_session,
)
from bench.mcp import INITIALIZE, dsh_path
from bench.process_tree import Run, run_measured
from bench.source_build import config_mapping
from bench.timing import Figure, Timing, best_of, interleaved
from dsh_host import Config, Event, Host, SurfaceSnapshot
from dsh_host.testing import private_homes

GB = float(os.environ.get("DSH_BENCH_SOURCES_GB", "2"))
ROUNDS = int(os.environ.get("DSH_BENCH_SOURCES_ROUNDS", "3"))
ROOT = Path(__file__).resolve().parents[1]
MCP_TIMEOUT = 1800.0
APPEND_BYTES = 1_000_000


@dataclasses.dataclass(frozen=True)
class Variant:
    """What one run measures: issue 37's two agents (`agents` 2), or all four sharing the corpus's size."""

    agents: int

    @classmethod
    def from_environment(cls) -> Variant:
        """The variant `DSH_BENCH_SOURCES_AGENTS` names (2 unless set); anything but 2 or 4 exits with one line."""
        value = os.environ.get("DSH_BENCH_SOURCES_AGENTS", "2")
        if value.strip() not in ("2", "4"):
            raise SystemExit(f"DSH_BENCH_SOURCES_AGENTS must be 2 or 4, not {value!r}")
        return cls(int(value))

    def name(self, figure: str) -> str:
        """A figure's name: `sources_<figure>` for two agents (as before), `sources4_<figure>` for four."""
        if self.agents == 2:
            return "mcp_first_search_cold_home" if figure == "mcp_first_search_cold_home" else f"sources_{figure}"
        return f"sources4_{figure}"

    def corpus(self, out: Path) -> Corpus:
        """`GB` GB: all of it Claude Code and Codex, or half of it with a quarter each of Gemini CLI and OpenCode."""
        if self.agents == 2:
            return generate(out, gb=GB)
        return generate(out, gb=GB / 2, gemini_gb=GB / 4, opencode_gb=GB / 4)

    def big_sessions(self, corpus: Corpus) -> list[tuple[SessionFile, str]]:
        """The big sessions whose warm reads are measured, each with its figures' label."""
        if self.agents == 2:
            return [(corpus.big_claude, "500mb"), (corpus.big_codex, "codex_350mb")]
        assert corpus.big_gemini is not None and corpus.opencode is not None
        return [(corpus.big_gemini, "gemini_125mb"), (corpus.opencode.big, "opencode_125mb")]


def _child(*argv: str) -> tuple[Run, dict[str, Any]]:
    run = run_measured([sys.executable, "-m", "bench.source_build", *argv], cwd=ROOT)
    return run, orjson.loads(run.stdout)


def _start(mapping: dict[str, object]) -> Host:
    return Host.start(Config.from_mapping(mapping))


def _source_host(data_dir: Path, corpus: Corpus) -> Host:
    return _start(config_mapping(str(data_dir), corpus.dirs()))


def _cold_build(data: Path, corpus: Corpus) -> tuple[Run, float]:
    """A cold build of every index into the empty `data`: the measured child and the seconds it reports."""
    run, result = _child("build", str(data), *(f"{name}={folder}" for name, folder in corpus.dirs().items()))
    assert result["sessions"] == corpus.sessions, (result, corpus.sessions)
    return run, float(result["seconds"])


def _size(corpus: Corpus) -> str:
    database = "" if corpus.opencode is None else f" and an OpenCode database of {corpus.opencode.bytes / 1e6:.0f} MB"
    return f"{corpus.bytes / 1e9:.2f} GB in {corpus.files} files{database}, {corpus.sessions} sessions"


def _largest(corpus: Corpus) -> str:
    return "the OpenCode database" if corpus.database_is_largest else "the big transcript"


def build_figures(tmp: Path, corpus: Corpus, variant: Variant) -> tuple[list[Figure], Path]:
    """The cold-build figures, and the data dir the last build left (a warm index)."""
    bare_seconds: list[float] = []
    bare_runs: list[Run] = []
    build_seconds: list[float] = []
    build_runs: list[Run] = []
    data = tmp / "build"
    for _ in range(ROUNDS):
        run, result = _child("bare", corpus.root)
        bare_runs.append(run)
        bare_seconds.append(result["seconds"])
        if data.exists():
            shutil.rmtree(data)
        run, seconds = _cold_build(data, corpus)
        build_runs.append(run)
        build_seconds.append(seconds)
    size = _size(corpus)
    cpu = max(run.cpu / run.wall for run in build_runs)
    bare_cpu = max(run.cpu / run.wall for run in bare_runs)
    peak = max(run.peak_mb for run in build_runs)
    written = corpus.bytes / 1e6 / corpus.seconds
    largest = f"largest file {_largest(corpus)}, {corpus.largest_bytes / 1e6:.0f} MB"
    every = "both indexes" if variant.agents == 2 else f"all {variant.agents} indexes"
    figures = [
        Figure.timed(
            variant.name("cold_build_2gb"),
            Timing(tuple(build_seconds)),
            Timing(tuple(bare_seconds)),
            target=1.0,
            note=(
                f"cold build of {every} over {size} vs reading and decoding every line and row once; build "
                f"CPU/wall {cpu:.2f} (bare loop {bare_cpu:.2f}); corpus written at {written:.0f} MB/s"
            ),
        ),
        Figure(
            variant.name("cold_build_peak_rss"),
            peak,
            max(run.peak_mb for run in bare_runs),
            unit="MB",
            target=150.0,
            absolute=True,
            note=f"peak RSS over the build's process tree ({size}; {largest}) vs the bare loop's",
        ),
    ]
    doubled = double_largest(corpus, tmp / "doubled")
    doubled_run, _ = _cold_build(tmp / "build-doubled", doubled)
    figures.append(
        Figure(
            variant.name("cold_build_rss_doubling"),
            doubled_run.peak_mb,
            peak,
            unit="MB",
            target=1.10,
            note=f"peak RSS of the cold build with the largest file, {_largest(corpus)}, doubled "
            f"({doubled.largest_bytes / 1e6:.0f} MB) vs as it is",
        )
    )
    shutil.rmtree(tmp / "build-doubled")
    shutil.rmtree(tmp / "doubled")
    return figures, data


class _McpClient:
    """`dsh mcp` on pipes: one JSON-RPC line out, lines in (read by a thread) until the answer, with a deadline."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([dsh_path(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def send(self, frame: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(frame) + b"\n")
        self.process.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        deadline = time.monotonic() + MCP_TIMEOUT
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"dsh mcp gave no answer to {method} in {MCP_TIMEOUT:.0f} s") from None
            if not line:
                raise RuntimeError(f"dsh mcp exited ({self.process.wait()}) before answering {method}")
            answer = orjson.loads(line)
            if answer.get("id") == self._next:
                assert "result" in answer, answer
                return dict(answer["result"])

    def close(self) -> float:
        """End its input and wait for it to exit (killing it after a minute); the seconds it took."""
        assert self.process.stdin is not None
        start = time.perf_counter()
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return time.perf_counter() - start


def mcp_figure(tmp: Path, corpus: Corpus, variant: Variant) -> Figure:
    home = tmp / "mcp-home"
    home.mkdir()
    config = tmp / "mcp.toml"
    dirs = corpus.dirs()
    config.write_text(
        "[host]\n"
        f"plugins = {orjson.dumps(['session-reference', 'mcp', *dirs]).decode()}\n"
        + "".join(f'[sources.{name}]\ndir = "{folder}"\n' for name, folder in dirs.items())
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env.update(private_homes(home), DSH_HOME=str(tmp / "mcp-data"), DSH_CONFIG=str(config))
    client = _McpClient(env)
    try:
        client.call("initialize", INITIALIZE)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        search = {"name": "search_sessions", "arguments": {"query": PLANTED_PHRASE, "limit": 10}}
        start = time.perf_counter()
        first = client.call("tools/call", search)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        second = client.call("tools/call", search)
        warm = time.perf_counter() - start
    finally:
        exit_seconds = client.close()

    def found(result: dict[str, Any]) -> int:
        return len((result.get("structuredContent") or {}).get("sessions", []))

    return Figure(
        variant.name("mcp_first_search_cold_home"),
        cold,
        warm,
        unit="s",
        target=5.0,
        absolute=True,
        note=(
            f"dsh mcp, empty index, {corpus.bytes / 1e9:.2f} GB home: first search_sessions answered with "
            f"{found(first)} of the {len(corpus.planted)} planted sessions; the second search right after "
            f"found {found(second)}; it exited {exit_seconds:.1f} s after its input ended"
        ),
    )


def _import_all(source_host: Host, stored: Host) -> dict[str, str]:
    """Every source session's synthesized log imported into `stored`'s store; source id -> stored id.

    Each copy ends with the `session/title` a dsh session of it would carry (the source's title),
    so a store listing reads titles as a source listing shows them.
    """
    copies: dict[str, str] = {}
    for name in source_host.sources.names:
        source = source_host.sources.get(name)
        for row in source.list_sessions():
            header, events = source.read_events(row.id)
            if row.title is not None:
                last = events[-1].time if events else int(header.created_at)
                title = {"title": row.title, "source": {"kind": "fallback"}}
                events = [*events, Event("session/title", len(events), last, title)]
            copy = f"copy-{len(copies)}"
            stored.store.import_log(dataclasses.replace(header, id=copy), events)
            copies[row.id] = copy
    return copies


def _run(loop: asyncio.AbstractEventLoop, make: Callable[[], Any]) -> Callable[[], object]:
    return lambda: loop.run_until_complete(make())


def listing_figures(source_host: Host, stored: Host, corpus: Corpus, variant: Variant) -> Iterator[Figure]:
    sources, store = source_host.services.session_query, stored.services.session_query
    loop = asyncio.new_event_loop()
    try:
        planted = loop.run_until_complete(
            sources.search_candidates(PLANTED_PHRASE, target_id=None, target_cwd=None, limit=50)
        )
        assert {row.id for row in planted} == set(corpus.planted), planted
        listed = loop.run_until_complete(sources.list_sessions())
        assert len(listed) == corpus.sessions == len(loop.run_until_complete(store.list_sessions()))
        list_sources, list_store = interleaved(
            _run(loop, sources.list_sessions), _run(loop, store.list_sessions), rounds=5, repeat=3
        )
        yield Figure.timed(
            variant.name("list_10k_warm"),
            list_sources,
            list_store,
            target=1.5,
            note=f"list_sessions of {corpus.sessions} source sessions (index warm) vs of {corpus.sessions} stored ones",
        )
        cwd = corpus.big_claude.cwd

        def search(query: Any) -> Callable[[], object]:
            # A new topic each call, the same sequence on both sides: an answer kept from an earlier
            # call with the same words (the sources share one per index file) is not what is measured.
            topics = itertools.cycle(TOPICS)
            return _run(
                loop,
                lambda: query.search_candidates(next(topics), target_id=None, target_cwd=cwd, limit=50),
            )

        found = loop.run_until_complete(
            sources.search_candidates(SEARCH_TOPIC, target_id=None, target_cwd=cwd, limit=50)
        )
        search_sources, search_store = interleaved(search(sources), search(store), rounds=5, repeat=3)
        yield Figure.timed(
            variant.name("search_10k_warm"),
            search_sources,
            search_store,
            target=1.5,
            note=f"search_candidates of a new topic each call ({len(TOPICS)} in turn, '{SEARCH_TOPIC}' finding "
            f"{len(found)}) over {corpus.sessions} source sessions (index warm) vs over the same stored",
        )
    finally:
        loop.close()


def _rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no rchar")


def read_figures(
    source_host: Host, stored: Host, big: SessionFile, copy: str, label: str, variant: Variant
) -> Iterator[Figure]:
    """`<prefix>_read_surface_<label>_warm` and `..._bytes_read` of one big session against its stored copy."""
    source = source_host.sources.get(big.session_id.partition(":")[0])
    sid = big.session_id
    mine, theirs = source.read_surface(sid), stored.store.read_surface(copy)
    assert mine.events == theirs.events
    what = f"the {big.bytes / 1e6:.0f} MB {_kind(sid)}"
    read, store = interleaved(
        lambda: source.read_surface(sid), lambda: stored.store.read_surface(copy), rounds=5, repeat=3
    )
    yield Figure.timed(
        variant.name(f"read_surface_{label}_warm"),
        read,
        store,
        target=1.5,
        note=f"read_surface of {what} ({len(mine.events)} surface events), index warm, "
        "vs the store's of the same surface",
    )
    before = _rchar()
    source.read_surface(sid)
    read_bytes = _rchar() - before
    before = _rchar()
    stored.store.read_surface(copy)
    store_bytes = _rchar() - before
    yield Figure(
        variant.name(f"read_surface_{label}_bytes_read"),
        read_bytes / 1e6,
        store_bytes / 1e6,
        unit="MB",
        target=4.0,
        absolute=True,
        note=f"bytes read (rchar) by one warm read_surface of {what}, index reads included "
        f"(an upper bound of what it read of the {'database' if sid.startswith('opencode:') else 'file'}), "
        "vs the store's read",
    )


_KINDS = {
    "claude-code": "transcript",
    "codex": "rollout",
    "gemini-cli": "Gemini CLI session",
    "opencode": "OpenCode session",
}


def _kind(session_id: str) -> str:
    return _KINDS[session_id.partition(":")[0]]


def append_figure(tmp: Path, source_host: Host, corpus: Corpus) -> Figure:
    source = source_host.sources.get("claude-code")
    sid, big = corpus.big_claude.session_id, Path(corpus.big_claude.path)
    appended, warm, cold = [], [], []
    empty = tmp / "empty-codex"
    for round_ in range(ROUNDS):
        marker = f"appended in round {round_} of the bench"
        append_claude(big, APPEND_BYTES, marker, seed=1000 + round_)
        read: list[SurfaceSnapshot] = []
        appended.append(best_of(lambda: read.append(source.read_surface(sid)), repeat=1))  # noqa: B023
        assert any(marker in str(event) for event in read[0].events), f"round {round_}'s records were not read"
        warm.append(best_of(lambda: source.read_surface(sid), repeat=1))
        home = tmp / f"one-mb-{round_}" / "claude"
        other = write_claude_session(home, APPEND_BYTES, seed=2000 + round_)
        fresh = _start(
            config_mapping(str(tmp / f"one-mb-data-{round_}"), {"claude-code": str(home), "codex": str(empty)})
        )
        one = fresh.sources.get("claude-code")
        cold.append(best_of(lambda: one.read_surface(other.session_id), repeat=1))  # noqa: B023
        fresh.close()
    return Figure.timed(
        "sources_read_surface_after_append_1mb",
        Timing(tuple(appended)),
        Timing(tuple(a + b for a, b in zip(warm, cold, strict=True))),
        target=1.3,
        note=f"read_surface after appending {APPEND_BYTES / 1e6:.0f} MB to the {corpus.big_claude.bytes / 1e6:.0f} MB "
        "transcript vs a warm read of it plus a cold read of a 1 MB transcript",
    )


def figures(tmp: Path) -> Iterator[Figure]:
    variant = Variant.from_environment()
    corpus = variant.corpus(tmp / "corpus")
    built, warm_data = build_figures(tmp, corpus, variant)
    yield from built
    yield mcp_figure(tmp, corpus, variant)
    source_host = _source_host(warm_data, corpus)
    stored = _start({"host": {"plugins": ["session-reference"], "data_dir": str(tmp / "stored")}})
    try:
        copies = _import_all(source_host, stored)
        yield from listing_figures(source_host, stored, corpus, variant)
        for big, label in variant.big_sessions(corpus):
            yield from read_figures(source_host, stored, big, copies[big.session_id], label, variant)
        if variant.agents == 2:
            yield append_figure(tmp, source_host, corpus)
    finally:
        source_host.close()
        stored.close()
