"""The lease race: two `dsh run --session S` started at once while the first waits on a slow model.

    python -m tests.lease_race [--store sqlite|postgres] [--runs N] [--wait]

Each run makes a fresh session S (one completed turn), then starts two `dsh run --session S`
processes at once. Their model is an OpenAI-compatible server on loopback that holds every answer
until the harness lets it go, so whichever process takes S's lease is held mid-turn:

- without `--wait`, the other must exit 1 at once, its stderr one line naming S and saying that
  another dsh drives it; only then does the model answer, and the first completes its turn;
- with `--wait` (`dsh run --wait 30`), the other says once that it waits; then the model answers,
  and both complete, one turn after the other.

Either way S's log must then hold exactly the new completed turns expected, none interrupted,
and pass the log check. Each run prints one line (`ok` or what went wrong); the last line is
one JSON object with the counts. `--store postgres` needs `DSH_TEST_POSTGRES_DSN` (a superuser
DSN, as `.ci/postgres start DIR` prints it): the harness makes a database and a role of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_host import Config, Event, Host, SessionHeader
from dsh_host.log import check_log
from tests.dsh_host.sse_server import Reply, SSEServer
from tests.e2e.e2e_support import clean_env, dsh_command

TIMEOUT = 60.0
"""Seconds a run may take before it counts as hung."""
WAIT_SECONDS = 30
OK = "ok"
KEY_VARIABLE = "LEASE_RACE_MODEL_KEY"
"""The variable holding the (loopback) model's key in the racers' environment."""


@dataclass(frozen=True)
class RaceStore:
    """The store the racing processes share: its configuration tables and the environment it needs."""

    name: str
    tables: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def sqlite(cls) -> RaceStore:
        """The default store, one SQLite file in each run's data dir."""
        return cls("sqlite")

    @classmethod
    def postgres(cls, dsn: str) -> RaceStore:
        """A PostgreSQL database, reached as `dsn` (passwords from `PGPASSFILE`)."""
        return cls("postgres", {"host": {"store": "postgres"}, "stores": {"postgres": {"dsn": dsn}}})


def chunk(text: str) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


def answer(text: str, release: asyncio.Event) -> Reply:
    """A streamed reply of `text`, sent once `release` is set."""
    finish = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Reply.sse([chunk(text), finish, "[DONE]"], after=release)


def _toml(mapping: Mapping[str, Any]) -> str:
    """A two-level mapping as TOML (JSON spells strings and lists the way TOML reads them)."""
    lines: list[str] = []
    for table, values in mapping.items():
        scalars = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
        if scalars:
            lines.append(f"[{table}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in scalars.items()]
        for key, value in values.items():
            if isinstance(value, Mapping):
                lines.append(f"[{table}.{key}]")
                lines += [f"{k} = {json.dumps(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Prepared:
    """A run's session S, stored and let go, and how a `dsh run` process reaches it."""

    config: Mapping[str, Any]
    env: Mapping[str, str]
    cwd: Path
    session_id: str

    async def read_events(self) -> tuple[SessionHeader, list[Event]]:
        """S's header and log as stored now."""
        async with Host.start(Config.from_mapping(self.config)) as host:
            return await asyncio.to_thread(host.store.read_events, self.session_id)


async def prepare(store: RaceStore, run_dir: Path, base_url: str | None) -> Prepared:
    """Store a session of one completed turn in `run_dir`; processes then use the model on `base_url`.

    Without `base_url` they use the keyless scripted model.
    """
    run_dir.mkdir(parents=True)
    config: dict[str, Any] = {"host": {"plugins": [], "data_dir": str(run_dir / "data")}}
    if base_url is not None:
        config["host"]["model"] = "openai:deepseek-chat"
        config["models"] = {"openai": {"base_url": base_url, "api_key_env": KEY_VARIABLE}}
    for table, values in store.tables.items():
        config.setdefault(table, {}).update(values)
    path = run_dir / "dsh.toml"
    path.write_text(_toml(config), encoding="utf-8")
    async with Host.start(Config.from_mapping(config)) as host:
        setup = await host.open_agent(cwd=run_dir, model="scripted")
        await setup.submit("setup")
        await setup.close()
    env = clean_env(run_dir, DSH_CONFIG=str(path), **{KEY_VARIABLE: "sk-race"}, **store.env)
    return Prepared(config, env, run_dir, setup.session.id)


class Racer:
    """One `dsh run` process and what it printed; `done` ends with its exit code."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.waiting = asyncio.Event()  # it said it waits for the lease
        self.done: asyncio.Future[int] = asyncio.ensure_future(self._collect())

    async def _collect(self) -> int:
        assert self.process.stdout is not None and self.process.stderr is not None

        async def lines(stream: asyncio.StreamReader, into: list[str]) -> None:
            while line := await stream.readline():
                into.append(line.decode("utf-8", "replace").rstrip("\n"))
                if into is self.stderr and "waiting up to" in into[-1]:
                    self.waiting.set()

        await asyncio.gather(lines(self.process.stdout, self.stdout), lines(self.process.stderr, self.stderr))
        return await self.process.wait()

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


async def spawn(run: Prepared, prompt: str, *, wait: bool) -> Racer:
    """Start `dsh run --session S PROMPT` (with `--wait 30` when `wait`)."""
    args = ["run", "--session", run.session_id, *(["--wait", str(WAIT_SECONDS)] if wait else []), prompt]
    process = await asyncio.create_subprocess_exec(
        *dsh_command(),
        *args,
        cwd=run.cwd,
        env=dict(run.env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Racer(process)


async def _first(*awaitables: Any) -> None:
    """Return when the first of `awaitables` is done (or after TIMEOUT); cancel the rest."""
    futures = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(futures, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()


async def one_run(server: SSEServer, store: RaceStore, run_dir: Path, *, wait: bool) -> str:
    """Race two `dsh run --session S` once; `OK`, or what went wrong."""
    run = await prepare(store, run_dir, server.base_url)
    release = asyncio.Event()
    server.replies.clear()
    server.replies.extend([answer("answer one", release), answer("answer two", release)])
    server.arrived.clear()
    asked = len(server.requests)
    racers = [await spawn(run, prompt, wait=wait) for prompt in ("first racer", "second racer")]
    try:
        problem = await _race(server, racers, release, run.session_id, wait)
    finally:
        release.set()
        for racer in racers:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(racer.done), TIMEOUT)
            racer.kill()
    if problem:
        return problem.replace(run.session_id, "S")  # counted together across runs
    expected_turns = 2 if wait else 1
    if len(server.requests) - asked != expected_turns:
        return f"the model was asked {len(server.requests) - asked} time(s), not {expected_turns}"
    header, events = await run.read_events()
    ends = [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]
    if ends != ["completed"] * (1 + expected_turns):
        return f"turn ends {ends}"
    violations = check_log(header, events)
    if violations:
        return f"log check: {violations[0]}"
    return OK


async def _race(server: SSEServer, racers: list[Racer], release: asyncio.Event, session_id: str, wait: bool) -> str:
    """Drive one race to its end; '' when it went as it must, else what went wrong."""
    exits = [asyncio.shield(r.done) for r in racers]
    refusal = f"dsh: error: session {json.dumps(session_id)} is being driven by another dsh"
    if not wait:
        # The loser must be refused while the winner is held at the model.
        await _first(*exits)
        finished = [r for r in racers if r.process.returncode is not None]
        if not finished:
            return "neither racer finished while the model was held"
        loser = finished[0]
        release.set()
        winner = racers[1 - racers.index(loser)]
        await asyncio.wait_for(asyncio.shield(winner.done), TIMEOUT)
        if (loser.process.returncode, loser.stderr) != (1, [refusal]):
            return f"the racer that ended first: exit {loser.process.returncode}, stderr {loser.stderr}"
        if winner.process.returncode != 0:
            return f"the other racer: exit {winner.process.returncode}, stderr {winner.stderr}"
        return ""

    async def held_and_waiting() -> None:
        await server.arrived.wait()
        await _first(*(r.waiting.wait() for r in racers))

    await _first(held_and_waiting(), *exits)
    if any(r.process.returncode is not None for r in racers):
        return f"a racer ended before the model answered: {[(r.process.returncode, r.stderr) for r in racers]}"
    if not any(r.waiting.is_set() for r in racers):
        return "no racer said it was waiting"
    release.set()
    for racer in racers:
        await asyncio.wait_for(asyncio.shield(racer.done), TIMEOUT)
    waiting_line = (
        f"dsh: session {json.dumps(session_id)} is being driven by another dsh; waiting up to {WAIT_SECONDS} s"
    )
    for racer in racers:
        expected = ([waiting_line] if racer.waiting.is_set() else []) + [f"session: {session_id}"]
        if (racer.process.returncode, racer.stderr) != (0, expected):
            return f"a racer: exit {racer.process.returncode}, stderr {racer.stderr}"
    return ""


async def race(
    store: RaceStore, workdir: Path, runs: int, *, wait: bool, report: Callable[[str], None]
) -> Counter[str]:
    """Run the race `runs` times; the count of each outcome (`OK` or what went wrong)."""
    outcomes: Counter[str] = Counter()
    async with SSEServer() as server:
        for index in range(runs):
            outcome = await one_run(server, store, workdir / f"run-{index}", wait=wait)
            outcomes[outcome] += 1
            report(f"run {index + 1}/{runs}: {outcome}")
    return outcomes


@contextlib.asynccontextmanager
async def _store_of(name: str, workdir: Path) -> AsyncIterator[RaceStore]:
    if name == "sqlite":
        yield RaceStore.sqlite()
        return
    from dsh_host.testing.postgres import DSN_VARIABLE, PostgresServer

    dsn = os.environ.get(DSN_VARIABLE)
    if not dsn:
        raise SystemExit(f'lease race: --store postgres needs {DSN_VARIABLE} (eval "$(.ci/postgres start DIR)")')
    pgpass = workdir / "pgpass"
    pgpass.touch(mode=0o600)
    os.environ["PGPASSFILE"] = str(pgpass)
    os.environ.pop("PGPASSWORD", None)
    server = PostgresServer(dsn, pgpass)
    try:
        yield RaceStore.postgres(server.database().dsn())
    finally:
        server.cleanup()


async def _main(name: str, runs: int, wait: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="dsh-lease-race-") as tmp:
        async with _store_of(name, Path(tmp)) as store:
            outcomes = await race(store, Path(tmp), runs, wait=wait, report=lambda line: print(line, flush=True))
    summary = {"store": name, "wait": wait, "runs": runs, "ok": outcomes[OK]}
    summary["failures"] = {outcome: count for outcome, count in outcomes.items() if outcome != OK}
    print(json.dumps(summary), flush=True)
    return 0 if outcomes[OK] == runs else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lease_race", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--wait", action="store_true", help="race `dsh run --wait 30`: both must complete")
    arguments = parser.parse_args(argv)
    return asyncio.run(_main(arguments.store, arguments.runs, arguments.wait))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
