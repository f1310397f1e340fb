"""Start-up benchmarks: whole `dsh` processes against the floor of the design, in the same run.

The floor (`bench/startup_floor.py`) is a Python process that imports click and pluggy and reads
the `dsh` entry points: what every `dsh` command has to do before it knows its commands. Each
process below is started `ROUNDS` times, the commands and the floor in alternating rounds (so
load drifting on a shared machine weighs on all alike), and each figure is a median.

- `startup_version`: `dsh --version`.
- `startup_sessions_list_100`: `dsh sessions list` over 100 stored sessions.
- `startup_ref_mention`: `dsh ref mention ID`.
- `startup_entry_points` (report): the floor against the same process without reading the
  entry points, so the share of the floor that discovery costs.
- `startup_<server>_initialize`: from spawning `dsh <server>` (a protocol server on stdio:
  `dsh acp`, `dsh mcp`) to its answer to `initialize`, against a floor of its own: the floor
  above that then imports the modules of the protocol's SDK the server needs (`floor_modules`,
  with the collector off as `dsh mcp` loads them), nothing of dsh. `dsh mcp` has a goal (what
  dsh adds to loading its SDK); `dsh acp` is reported.
- `startup_<server>_sdk_import` (report): the part of that time spent importing the protocol's
  SDK, from `-X importtime` runs of the same exchange (value: the SDK's import time; baseline:
  spawn to answer in those runs, which importtime slows alike; the ratio is the SDK's share).

Every process runs in a scratch directory with its own data dir and no configuration file, so
the standard installed features are mounted, as for someone who just installed dsh. The timed
processes may write bytecode (`PYTHONDONTWRITEBYTECODE` is dropped from their environment): an
installed package has it, and compiling sources on every run is not start-up; the first,
untimed run of each command writes it for an editable install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.timing import Figure
from dsh_host.testing import private_homes

ROUNDS = 21
IMPORTTIME_RUNS = 3
SESSIONS = 100
FLOOR = Path(__file__).with_name("startup_floor.py")
ANSWER_TIMEOUT = 120.0
MCP_TARGET = 1.25
"""`dsh mcp`'s spawn-to-initialize-answer over its floor: what dsh adds to loading its SDK (its
host and plugins, the catalog, the tools' schemas, the handshake) is at most a quarter of it."""


@dataclass(frozen=True)
class ProtocolServer:
    """A `dsh` command that serves a JSON-RPC protocol on stdio, one frame a line."""

    command: str
    sdk: str
    """The top-level module of the protocol's SDK, whose import time is reported."""
    initialize: Mapping[str, Any]
    """The client's `initialize` request."""
    floor_modules: tuple[str, ...]
    """The SDK's modules the server needs, which its floor imports."""
    target: float | None = None
    """The goal for spawn-to-answer over the floor (None: reported only)."""


PROTOCOL_SERVERS = (
    ProtocolServer(
        command="acp",
        sdk="acp",
        initialize={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}},
        },
        floor_modules=("acp", "acp.connection", "acp.schema"),
    ),
    ProtocolServer(
        command="mcp",
        sdk="mcp",
        initialize={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        },
        floor_modules=("mcp.server", "mcp.shared.message", "mcp.types"),
        target=MCP_TARGET,
    ),
)


@dataclass(frozen=True)
class Scene:
    """Where the timed processes run: the `dsh` script, the environment and working directory."""

    dsh: str
    env: Mapping[str, str]
    cwd: Path

    def run(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.dsh, *args], env=dict(self.env), cwd=self.cwd, capture_output=True, text=True, check=False
        )


def _dsh_script() -> str:
    """The `dsh` console script installed beside this interpreter (else the one on PATH)."""
    found = shutil.which("dsh", path=str(Path(sys.executable).parent)) or shutil.which("dsh")
    if found is None:
        raise SystemExit("bench.startup: no `dsh` script found beside the interpreter or on PATH")
    return found


def _scene(workdir: Path) -> Scene:
    home, config = workdir / "home", workdir / "config"
    home.mkdir(parents=True)
    config.mkdir()
    dropped = ("DSH_CONFIG", "DSH_LOAD_PLUGINS", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    # No user configuration file is found under a fresh config dir, nor a dsh.toml in `workdir`.
    # The default plugins include the sources of other agents' sessions: they read these homes.
    env.update(private_homes(workdir / "user"), DSH_HOME=str(home), XDG_CONFIG_HOME=str(config))
    return Scene(_dsh_script(), env, workdir)


def _store_sessions(home: Path, count: int) -> list[str]:
    """`count` titled sessions in the store of data dir `home`; their ids."""
    from dsh_host import Event, Host, SessionHeader, load_config

    ids = [f"session-{i:03d}" for i in range(count)]
    user = {"kind": "user"}
    with Host.start(load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": ""}, cwd=home)) as host:
        for i, session_id in enumerate(ids):
            header = SessionHeader(id=session_id, created_at=1_700_000_000_000 + i * 1000, cwd=f"/work/p{i % 7}")
            title = {"title": f"Refactor module {i}", "messageSeqs": [1], "source": {"kind": "fallback"}}
            host.store.append(
                header,
                [
                    Event("turn/start", 0, 0, {"turn": 1, "trigger": {"kind": "message", "source": user}}),
                    Event("user/message", 1, 0, {"content": [{"type": "text", "text": "x"}], "source": user}, "append"),
                    Event("session/title", 2, 0, title),
                ],
            )
    return ids


def _timed(fn: Callable[[], object]) -> Callable[[], float]:
    """`fn` made to return the seconds it took."""

    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


def _checked(scene: Scene, args: Sequence[str], expect: Callable[[str], bool]) -> Callable[[], float]:
    """A timed run of `dsh ARGS`, after checking once that it succeeds and prints what `expect` wants."""
    done = scene.run(args)
    if done.returncode != 0 or not expect(done.stdout):
        raise SystemExit(f"bench.startup: dsh {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return _timed(lambda: scene.run(args))


def _python(scene: Scene, *args: str) -> Callable[[], float]:
    """A timed run of this interpreter on `args`."""
    argv = [sys.executable, *args]
    return _timed(lambda: subprocess.run(argv, env=dict(scene.env), cwd=scene.cwd, check=True))


def _answer_time(scene: Scene, server: ProtocolServer, python_flags: Sequence[str] = ()) -> tuple[float, str]:
    """Seconds from spawning `dsh <server>` to its `initialize` answer, and its stderr.

    The server is then told EOF and must exit 0.
    """
    argv = [sys.executable, *python_flags, scene.dsh, server.command] if python_flags else [scene.dsh, server.command]
    # stderr to a file: a pipe nobody reads until the answer could fill up and stall the server.
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(
            argv, env=dict(scene.env), cwd=scene.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(server.initialize).encode() + b"\n")
        process.stdin.flush()
        line = process.stdout.readline()
        elapsed = time.perf_counter() - start
        try:
            process.communicate(timeout=ANSWER_TIMEOUT)  # EOF on stdin: the server exits
        except subprocess.TimeoutExpired:
            process.kill()
            raise SystemExit(f"bench.startup: dsh {server.command} did not exit on EOF") from None
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    answer = json.loads(line) if line.strip() else {}
    if process.returncode != 0 or answer.get("id") != server.initialize["id"] or "result" not in answer:
        raise SystemExit(f"bench.startup: dsh {server.command} gave no initialize answer: {line!r} {stderr[-2000:]}")
    return elapsed, stderr


def _until_answer(scene: Scene, server: ProtocolServer) -> Callable[[], float]:
    """A run of `dsh <server>` that returns the seconds from spawn to its `initialize` answer."""
    return lambda: _answer_time(scene, server)[0]


_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def outermost_import_us(importtime: str, package: str) -> int:
    """Microseconds spent importing `package` (and what it imported), from `-X importtime` output.

    Sums the cumulative time of each import of a `package` module that is not nested in another
    one (importtime prints a module after the modules it imported, one level deeper).
    """
    matches = (_IMPORTTIME.match(line) for line in importtime.splitlines())
    lines = [(len(m.group(3)), m.group(4), int(m.group(2))) for m in matches if m]
    total = 0
    for i, (level, name, cumulative) in enumerate(lines):
        if name.split(".")[0] != package:
            continue
        parent = next((other for depth, other, _ in lines[i + 1 :] if depth < level), None)
        if parent is None or parent.split(".")[0] != package:
            total += cumulative
    return total


def _sdk_import(scene: Scene, server: ProtocolServer) -> tuple[float, float]:
    """Median SDK import time and median spawn-to-answer time over `-X importtime` runs."""
    imports, answers = [], []
    for _ in range(IMPORTTIME_RUNS):
        elapsed, stderr = _answer_time(scene, server, ("-X", "importtime"))
        imports.append(outermost_import_us(stderr, server.sdk) / 1e6)
        answers.append(elapsed)
    return statistics.median(imports), statistics.median(answers)


def figures(workdir: Path) -> Iterator[Figure]:
    scene = _scene(workdir)
    ids = _store_sessions(Path(scene.env["DSH_HOME"]), SESSIONS)
    servers = [s for s in PROTOCOL_SERVERS if importlib.util.find_spec(s.sdk) is not None]
    timed: dict[str, Callable[[], float]] = {
        "python": _python(scene, "-c", "pass"),
        "floor": _python(scene, str(FLOOR)),
        "floor_without_entry_points": _python(scene, str(FLOOR), "--no-entry-points"),
        "version": _checked(scene, ["--version"], lambda out: out.startswith("dsh ")),
        "sessions_list": _checked(scene, ["sessions", "list"], lambda out: len(out.splitlines()) == SESSIONS),
        "ref_mention": _checked(scene, ["ref", "mention", ids[0]], lambda out: ids[0] in out),
    }
    for server in servers:
        _answer_time(scene, server)  # fails here, untimed, when the server cannot start
        timed[server.command] = _until_answer(scene, server)
        timed[f"floor_{server.command}"] = _python(scene, str(FLOOR), "--import", ",".join(server.floor_modules))
    runs: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(ROUNDS):
        for name, fn in timed.items():
            runs[name].append(fn())
    median = {name: statistics.median(times) for name, times in runs.items()}
    floor = median["floor"]
    how = f"median of {ROUNDS} runs, alternating with the floor (click + pluggy + the dsh entry points)"
    yield Figure("startup_version", median["version"], floor, target=1.3, note=f"dsh --version; {how}")
    yield Figure(
        "startup_sessions_list_100",
        median["sessions_list"],
        floor,
        target=1.8,
        note=f"dsh sessions list over {SESSIONS} stored sessions, standard plugins mounted; {how}",
    )
    yield Figure("startup_ref_mention", median["ref_mention"], floor, target=1.8, note=f"dsh ref mention ID; {how}")
    yield Figure(
        "startup_entry_points",
        floor,
        median["floor_without_entry_points"],
        note=(
            "the floor vs the same process without reading the dsh entry points (nor loading "
            f"importlib.metadata); python -c pass takes {median['python'] * 1000:.0f} ms; median of {ROUNDS} runs"
        ),
    )
    for server in servers:
        yield Figure(
            f"startup_{server.command}_initialize",
            median[server.command],
            median[f"floor_{server.command}"],
            target=server.target,
            note=(
                f"spawning dsh {server.command} until its initialize answer vs its floor, the floor above "
                f"then importing {', '.join(server.floor_modules)} (the SDK's modules it needs); the floor "
                f"without them takes {floor * 1000:.0f} ms; median of {ROUNDS} alternating runs"
            ),
        )
        sdk, answer = _sdk_import(scene, server)
        yield Figure(
            f"startup_{server.command}_sdk_import",
            sdk,
            answer,
            note=(
                f"importing the {server.sdk} SDK (and what it imports) vs spawn to initialize answer, both under "
                f"-X importtime (median of {IMPORTTIME_RUNS}); the ratio is the SDK's share"
            ),
        )
