"""`dsh mcp` benchmarks: what the protocol over stdio adds to the work it serves.

A real `dsh mcp` process is driven by a bare JSON-RPC client on its pipes (write a line, read
the answering line, parse it with orjson), so the figures hold the server's framing, validation
and serialization and the pipe, not a client SDK's own checks (nor the seconds Python's json
module would take to parse a 300 KB answer). Each baseline is the same work done in
process on a host of the same configuration, timed in the same run, alternating with it.

- `mcp_read_sessions_3`: `read_sessions` of 3 references over stdio vs `prepare` of the same 3 in
  process (three persisted 20,000-event sessions, 200 surface messages each, enough text that
  retention drops some); the note gives the milliseconds stdio adds (goal: under 2), and the
  round trip of a `ping` in the same rounds: the floor of any call over the pipes (two process
  wakeups), which grows with the machine's load.
- `mcp_search_sessions_100k`: `search_sessions` ("migration bug", a cwd, 50 results) over stdio
  over 100,000 sessions vs the query service's `search_candidates` of the same in process; the
  goal is that stdio adds at most 1.0 ms (a ratio goal would sit below the floor: one `ping`
  round trip over the same pipes, reported beside it, plus the SDK's own pipeline).
- `mcp_resources_last_page_100k`: the last `resources/list` page of 100,000 sessions vs the
  first, both over stdio (each round's best of many calls, alternating: the same work at both ends).

Start-up (spawn to the `initialize` answer, and the share of it spent importing the SDK) is in
`bench/startup.py` (`startup_mcp_initialize`, `startup_mcp_sdk_import`).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.search import LARGE, build
from bench.session_reference import build_events
from bench.timing import Figure, interleaved
from dsh_host import Host, SessionHeader, load_config
from dsh_host.config import DEFAULT_PLUGINS
from dsh_host.testing import private_homes
from dsh_session_reference import encode_uri

SOURCES = ("bench-source-a", "bench-source-b", "bench-source-c")
CALLS = 60
ROUNDS = 5
INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
SEARCH = {"query": "migration bug", "cwd": "/work/p7", "limit": 50}
SEARCH_ADDED_LIMIT = 0.001
"""The most seconds stdio may add to a search over the same search in process."""


def _environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    # The default plugins include the sources of other agents' sessions: they read these homes.
    env.update(private_homes(home / "user"), DSH_HOME=str(home), XDG_CONFIG_HOME=str(home / "config"))
    return env


def dsh_path() -> str:
    """The `dsh` command beside this Python."""
    return str(Path(sys.executable).with_name("dsh"))


class RawClient:
    """`dsh mcp` on pipes, spoken to one JSON-RPC line at a time."""

    def __init__(self, home: Path) -> None:
        self.process = subprocess.Popen(
            [dsh_path(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_environment(home)
        )
        self._next = 0
        self.call("initialize", INITIALIZE)
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _write(self, frame: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        self._write({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        assert self.process.stdout is not None
        answer = orjson.loads(self.process.stdout.readline())
        assert answer.get("id") == self._next and "result" in answer, answer
        return answer["result"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def _host(home: Path) -> Host:
    # The standard features only: no source of other agents' sessions reads this process's home.
    plugins = ",".join(DEFAULT_PLUGINS)
    return Host.start(load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": plugins}, cwd=home))


def _median_of(call: Callable[[], object], times: int = CALLS) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _alternating(*calls: Callable[[], object]) -> list[float]:
    """The median of each call's times over `ROUNDS` alternating rounds (load drifts on both alike)."""
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(ROUNDS):
        for index, call in enumerate(calls):
            samples[index].append(_median_of(call))
    return [statistics.median(times) for times in samples]


def read_figure(workdir: Path) -> Figure:
    home = workdir / "read"
    host = _host(home)
    loop = asyncio.new_event_loop()
    client = None
    try:
        for index, session_id in enumerate(SOURCES):
            header = SessionHeader(id=session_id, created_at=index, cwd=f"/bench/{index}")
            host.store.import_log(header, build_events(index, events=20_000, messages=200))
        service = host.services.session_references
        references = [{"sessionId": session_id} for session_id in SOURCES]
        prepared = loop.run_until_complete(service.prepare(None, [], references))
        text = prepared.contexts[0]["content"][0]["text"]
        client = RawClient(home)
        arguments = {"name": "read_sessions", "arguments": {"references": list(SOURCES)}}
        assert client.call("tools/call", arguments)["content"][0]["text"] == text  # the same bytes
        stdio, in_process, ping = _alternating(
            lambda: client.call("tools/call", arguments),
            lambda: loop.run_until_complete(service.prepare(None, [], references)),
            lambda: client.call("ping", {}),
        )
        return Figure(
            name="mcp_read_sessions_3",
            value=stdio,
            baseline=in_process,
            target=None,
            note=(
                f"read_sessions of 3 persisted 20,000-event sessions over stdio (bare JSON-RPC client, orjson; "
                f"{len(text):,} characters of snapshot) vs prepare() of the same in process, median of "
                f"{ROUNDS} alternating rounds of {CALLS} calls; stdio adds {(stdio - in_process) * 1000:.2f} ms "
                f"(goal: under 2 ms), a ping round trip takes {ping * 1000:.2f} ms"
            ),
        )
    finally:
        if client is not None:
            client.close()
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        host.close()


def large_figures(workdir: Path) -> Iterator[Figure]:
    home = workdir / "large"
    home.mkdir(parents=True)
    build(home / "sessions.sqlite3", LARGE, seed=1).close()
    host = _host(home)
    loop = asyncio.new_event_loop()
    client = RawClient(home)
    try:
        query = host.services.session_query

        def in_process() -> Any:
            rows = loop.run_until_complete(
                query.search_candidates(
                    SEARCH["query"], target_id=None, target_cwd=SEARCH["cwd"], limit=SEARCH["limit"]
                )
            )
            assert len(rows) == SEARCH["limit"]
            return rows

        search = {"name": "search_sessions", "arguments": SEARCH}
        found = client.call("tools/call", search)["structuredContent"]["sessions"]
        assert [s["id"] for s in found] == [row.id for row in in_process()]
        stdio, local, ping = _alternating(
            lambda: client.call("tools/call", search), in_process, lambda: client.call("ping", {})
        )
        yield Figure(
            name="mcp_search_sessions_100k",
            value=stdio,
            baseline=local,
            added_limit=SEARCH_ADDED_LIMIT,
            note=(
                f"search_sessions({SEARCH['query']!r}, cwd, limit {SEARCH['limit']}) over 100,000 sessions over "
                f"stdio vs the query service's search_candidates of the same in process, median of {ROUNDS} "
                f"alternating rounds of {CALLS} calls; stdio adds {(stdio - local) * 1000:.2f} ms (goal: at most "
                f"{SEARCH_ADDED_LIMIT * 1000:.1f} ms); the floor, a ping round trip over the same pipes, takes "
                f"{ping * 1000:.2f} ms"
            ),
        )

        cursors: list[str | None] = [None]
        while True:
            page = client.call("resources/list", {} if cursors[-1] is None else {"cursor": cursors[-1]})
            if page.get("nextCursor") is None:
                break
            cursors.append(page["nextCursor"])
        assert page["resources"][-1]["uri"] == encode_uri(host.store.list_sessions_page(1, (0, ""))[0].id)
        # The same work at both ends: each round's best of many calls, which a loaded machine's
        # scheduling delays (the bulk of a call's spread here) reach least.
        first, last = interleaved(
            lambda: client.call("resources/list", {}),
            lambda: client.call("resources/list", {"cursor": cursors[-1]}),
            rounds=10,
            repeat=20,
        )
        yield Figure.timed(
            "mcp_resources_last_page_100k",
            last,
            first,
            target=1.2,
            note=(
                f"resources/list page {len(cursors)} (the last) of 100,000 sessions vs page 1, both over stdio, "
                "median over 10 alternating rounds of the ratio of each round's best of 20 calls"
            ),
        )
    finally:
        client.close()
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        host.close()


def figures(workdir: Path) -> Iterator[Figure]:
    yield read_figure(workdir)
    yield from large_figures(workdir)
