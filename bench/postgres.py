"""PostgreSQL store benchmarks, on the server `DSH_TEST_POSTGRES_DSN` names (skipped without one).

`eval "$(.ci/postgres start DIR)"` starts a throwaway loopback cluster and sets the variable (a
superuser DSN: the benchmark creates its own database and an ordinary role, and measures as
that role, under row-level security like any team member). Each figure has a same-run baseline:

- `pg_read_surface_200k`: the query service's `read_surface` of a persisted 200,000-event session
  (2,000 on the surface) vs a bare `SELECT` of those 2,000 rows by key, each decoded with
  `json.loads`.
- `pg_surface_page_200k`: the query service's `read_surface_page` of the newest 200 entries of
  the same session vs its `read_surface` of the whole surface.
- `pg_list_sessions_10k`: the query service's `list_sessions()` over 10,000 titled sessions vs a
  bare `SELECT` of the listed columns.
- `pg_append_flush_1000`: `Session.append` of a prebuilt 1,000-event turn and
  `host.sessions.flush` vs one `COPY` of the same rows into a table of the same layout.
- `pg_load_60s` and `sqlite_load_60s`: 8 writer and 4 reader processes for 60 s (loopback only,
  bounded), in events per second; every read is checked to be one consistent snapshot, and at
  the end every log is checked for lost or duplicated events. `DSH_BENCH_LOAD_SECONDS` shortens it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.store import SURFACE, append_turn, compacted_session, persist, turn_events
from bench.timing import Figure, interleaved
from dsh_host import Config, Host
from dsh_host.session.events import Event, SessionHeader, event_from_json
from dsh_host.session.surface import fold

WRITERS, READERS = 8, 4
TURN_EVENTS = 40  # per turn of a load writer, flushed in batches of BATCH
BATCH = 8
SURFACE_PAGE = 200


def _server(workdir: Path) -> Any:
    """The benchmark's server helper, or None (with a message) when no server is configured."""
    dsn = os.environ.get("DSH_TEST_POSTGRES_DSN")
    if not dsn:
        print(
            'bench postgres: skipped, no server: set DSH_TEST_POSTGRES_DSN (eval "$(.ci/postgres start DIR)")',
            file=sys.stderr,
        )
        return None
    from dsh_host.testing.postgres import PostgresServer

    pgpass = workdir / "pgpass"
    pgpass.touch(mode=0o600)
    os.environ["PGPASSFILE"] = str(pgpass)
    os.environ.pop("PGPASSWORD", None)
    return PostgresServer(dsn, pgpass)


@dataclass(frozen=True)
class _Bench:
    """What a figure measures with: a host on the store and a bare connection, both as the role."""

    host: Host
    run: Callable[[Any], Any]  # runs a coroutine to completion on the figure's event loop
    conn: Any


@contextlib.contextmanager
def _bench(database: Any, workdir: Path) -> Iterator[_Bench]:
    """A host on the PostgreSQL store (no plugins) and a bare psycopg connection, as the
    benchmark's ordinary role, under row-level security like any team member."""
    import psycopg

    config = {
        "host": {"store": "postgres", "plugins": [], "data_dir": str(workdir)},
        "stores": {"postgres": {"dsn": database.dsn()}},
    }
    host = Host.start(Config.from_mapping(config))
    loop = asyncio.new_event_loop()
    conn = psycopg.connect(database.dsn(), autocommit=True)
    try:
        yield _Bench(host, loop.run_until_complete, conn)
    finally:
        conn.close()
        loop.close()
        host.close()


def surface_figures(database: Any, workdir: Path) -> Iterator[Figure]:
    """`pg_read_surface_200k` and `pg_surface_page_200k`, on one stored copy of the session."""
    with _bench(database, workdir) as bench:
        seqs = persist(bench.host, "log-200k", compacted_session(200_000))
        with database.admin() as admin:
            admin.execute("ANALYZE")
        (pk,) = bench.conn.execute("SELECT pk FROM dsh.sessions WHERE id = %s", (b"log-200k",)).fetchone()
        loads = json.loads
        query = bench.host.services.session_query

        def bare() -> None:
            rows = bench.conn.execute(
                "SELECT line FROM dsh.events WHERE session_pk = %s AND seq = ANY(%s)", (pk, seqs)
            ).fetchall()
            assert len([loads(line) for (line,) in rows]) == SURFACE

        def read() -> None:
            assert len(bench.run(query.read_surface("log-200k")).events) == SURFACE

        def page() -> None:
            assert len(bench.run(query.read_surface_page("log-200k", limit=SURFACE_PAGE)).entries) == SURFACE_PAGE

        baseline, value = interleaved(bare, read)
        whole, paged = interleaved(read, page)
    yield Figure.timed(
        "pg_read_surface_200k",
        value,
        baseline,
        target=2.0,
        note="session_query.read_surface of a persisted 200,000-event log (2,000 on the surface) vs a bare SELECT of "
        "those 2,000 rows by key + json.loads, same role under RLS",
    )
    yield Figure.timed(
        "pg_surface_page_200k",
        paged,
        whole,
        target=0.25,
        note=f"session_query.read_surface_page of the newest {SURFACE_PAGE} entries of a persisted 200,000-event log "
        "(2,000 on the surface) vs its read_surface of the whole surface, same role under RLS",
    )


def list_sessions_figure(database: Any, workdir: Path) -> Figure:
    count = 10_000
    with database.admin() as admin:
        # Rows exactly as the store writes them, made in one statement rather than 10,000 flushes.
        admin.execute(
            "INSERT INTO dsh.sessions (id, owner, created_at, cwd, header, next_seq, next_ord, title, title_seq, "
            "title_time, last_activity_at) SELECT convert_to('session-' || lpad(g::text, 5, '0'), 'UTF8'), %s, "
            "1700000000000 + g * 1000, '/work/p' || (g %% 50), '{}', 3, 1, "
            "'Refactor module ' || g || ' and its tests', 2, 0, 1700000000500 + g * 1000 "
            "FROM generate_series(0, %s - 1) g",
            (database.user, count),
        )
        admin.execute("ANALYZE")
    with _bench(database, workdir) as bench:
        query = bench.host.services.session_query

        def bare() -> None:
            rows = bench.conn.execute("SELECT id, cwd, created_at, title, last_activity_at FROM dsh.sessions")
            assert len(rows.fetchall()) == count

        def listing() -> None:
            records = bench.run(query.list_sessions())
            assert len(records) == count and records[0].title

        baseline, value = interleaved(bare, listing)
    return Figure.timed(
        "pg_list_sessions_10k",
        value,
        baseline,
        target=3.0,
        note="session_query.list_sessions over 10,000 titled sessions vs a bare SELECT id, cwd, created_at, "
        "title, last_activity_at, same role under RLS",
    )


def append_flush_figure(database: Any, workdir: Path) -> Figure:
    events = turn_events()  # built once, outside the timed region
    with database.admin() as admin:
        admin.execute("CREATE TABLE public.copy_baseline (LIKE dsh.events INCLUDING ALL)")
        admin.execute(f"GRANT INSERT ON public.copy_baseline TO {database.user}")
    with _bench(database, workdir) as bench:
        sessions = bench.host.sessions

        def append_and_flush() -> None:
            # A new session with a fresh random id: naming one would ask the store whether it is
            # taken, a round trip that is neither appending nor flushing.
            session = sessions.create("/bench")
            append_turn(session, events)
            bench.run(sessions.flush(session))
            sessions.forget(session.id)

        sample = sessions.create("/bench", "sample")
        append_turn(sample, events)
        sessions.forget("sample")
        lines = [e.to_line() for e in sample.events]
        keys = iter(range(1, 1_000_000))

        def copy() -> None:
            pk = next(keys)
            with (
                bench.conn.transaction(),
                bench.conn.cursor() as cur,
                cur.copy("COPY public.copy_baseline (session_pk, seq, line) FROM STDIN") as out,
            ):
                for seq, line in enumerate(lines):
                    out.write_row((pk, seq, line))

        append_and_flush()  # warm up the pool and the prepared statements
        copy()
        # Alternating rounds, so load on a shared machine drifting during the run weighs on both.
        baseline, value = interleaved(copy, append_and_flush, rounds=5, repeat=3)
    n = len(lines)
    return Figure.timed(
        "pg_append_flush_1000",
        value,
        baseline,
        per=n,
        unit="events/s",
        target=3.0,
        note="Session.append of a prebuilt 1,000-event turn + host.sessions.flush (one transaction) vs one COPY of "
        "the same rows into a table of the same layout",
    )


# -- load ---------------------------------------------------------------------------------------


def _open(kind: str, target: str) -> Any:
    if kind == "postgres":
        from dsh_host.store.postgres import PostgresSessionStore

        return PostgresSessionStore.open(target, pool_size=1)
    from dsh_host.store.sqlite import SqliteSessionStore

    return SqliteSessionStore.open(target)


def _load_event(seq: int, turn: int, i: int) -> Event:
    if i == 0:
        return Event("turn/start", seq, 0, {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    if i == TURN_EVENTS - 1:
        return Event("turn/end", seq, 0, {"turn": turn, "reason": {"kind": "completed"}})
    if i % 10 == 1:
        data = {"content": [{"type": "text", "text": f"message {seq}"}], "source": {"kind": "user"}}
        return Event("user/message", seq, 0, data, "append")
    return Event("assistant/chunk", seq, 0, {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "text": "x"}})


def _writer(kind: str, target: str, session_id: str, start: Any, window: Any, out: Any) -> None:
    store = _open(kind, target)
    header = SessionHeader(id=session_id, created_at=0, cwd="/bench")
    seq, errors, turn = 1, 0, 0  # the session was created with one event
    start.wait()  # every process is up
    start.wait()  # and the parent has set the window: the clock starts
    deadline = window.value
    try:
        while time.time() < deadline:
            turn += 1
            events = [_load_event(seq + i, turn, i) for i in range(TURN_EVENTS)]
            for start in range(0, TURN_EVENTS, BATCH):
                try:
                    store.append(header, events[start : start + BATCH])
                except Exception as exc:  # noqa: BLE001 - every error is counted and reported
                    errors += 1
                    print(f"writer {session_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    out.put(("writer", session_id, seq + start, errors))  # the batches before it are stored
                    return
            seq += TURN_EVENTS
    finally:
        store.close()
    out.put(("writer", session_id, seq, errors))


def _reader(kind: str, target: str, start: Any, window: Any, out: Any) -> None:
    store = _open(kind, target)
    reads = errors = 0
    start.wait()
    start.wait()
    deadline = window.value
    try:
        while time.time() < deadline:
            for row in store.list_sessions():
                try:
                    snapshot = store.read_surface(row.id)
                    _, lines = store.read_lines(row.id)
                    # The surface is one snapshot: exactly the fold of the log up to its seq.
                    through = snapshot.captured_through_seq
                    events = [event_from_json(json.loads(line), expected_seq=i) for i, line in enumerate(lines)]
                    assert through is not None and len(events) > through, (through, len(events))
                    assert [e["seq"] for e in snapshot.events] == list(fold(events[: through + 1]).nodes)
                except Exception as exc:  # noqa: BLE001 - every error is counted and reported
                    errors += 1
                    print(f"reader: {type(exc).__name__}: {exc}", file=sys.stderr)
                reads += 1
    finally:
        store.close()
    out.put(("reader", None, reads, errors))


def load(kind: str, target: str, seconds: float) -> tuple[float, float, int]:
    """WRITERS writer and READERS reader processes for `seconds`: (events/s, checked reads/s, errors).

    A writer stops at its first error. Raises AssertionError on a lost or duplicated event.
    """
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    store = _open(kind, target)
    for w in range(WRITERS):  # every session exists before the clock starts
        store.append(SessionHeader(id=f"load-{w}", created_at=0, cwd="/bench"), [_load_event(0, 0, 1)])
    store.close()
    start = context.Barrier(WRITERS + READERS + 1)
    window = context.Value("d", 0.0)
    procs = [
        context.Process(target=_writer, args=(kind, target, f"load-{w}", start, window, out), daemon=True)
        for w in range(WRITERS)
    ]
    procs += [
        context.Process(target=_reader, args=(kind, target, start, window, out), daemon=True) for _ in range(READERS)
    ]
    for proc in procs:
        proc.start()
    start.wait(timeout=120)  # every process has opened its store
    window.value = time.time() + seconds
    start.wait(timeout=120)
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join(30)
    written = {sid: seq for role, sid, seq, _ in results if role == "writer"}
    errors = sum(e for *_, e in results)
    reads = sum(n for role, _, n, _ in results if role == "reader")
    # Every log holds exactly the events its writer committed: no loss, no duplicate, in order.
    store = _open(kind, target)
    try:
        for sid, seq in written.items():
            _, lines = store.read_lines(sid)
            assert [json.loads(line)["seq"] for line in lines] == list(range(seq)), sid
    finally:
        store.close()
    total = sum(written.values()) - len(written)  # less the events written before the clock started
    return total / seconds, reads / seconds, errors


def load_figure(database: Any, workdir: Path, seconds: float) -> Figure:
    """The same load on PostgreSQL and on SQLite, events per second side by side."""
    sqlite_events, sqlite_reads, sqlite_errors = load("sqlite", str(workdir / "load.sqlite3"), seconds)
    pg_events, pg_reads, pg_errors = load("postgres", database.dsn(), seconds)
    assert pg_errors == 0, f"{pg_errors} errors under load on PostgreSQL"
    return Figure(
        name=f"load_{round(seconds)}s",
        value=pg_events,
        baseline=sqlite_events,
        unit="events/s",
        higher_is_better=True,
        note=f"{WRITERS} writer processes ({TURN_EVENTS}-event turns in flushes of {BATCH}) + {READERS} reader "
        f"processes (list, read_surface, read_lines, each checked to be one snapshot) for {seconds:.0f} s, "
        f"loopback: PostgreSQL {pg_events:.0f} events/s and {pg_reads:.1f} checked reads/s (value) vs SQLite "
        f"{sqlite_events:.0f} events/s and {sqlite_reads:.1f} reads/s (baseline); PostgreSQL 0 errors, SQLite "
        f"{sqlite_errors} (a writer stops at its first, e.g. 'database is locked' past the busy timeout); no event "
        "lost or duplicated on either",
    )


def figures(workdir: Path) -> Iterator[Figure]:
    server = _server(workdir)
    if server is None:
        return
    seconds = float(os.environ.get("DSH_BENCH_LOAD_SECONDS", "60"))
    try:
        database = server.database()
        yield from surface_figures(database, workdir)
        server.drop(database.name)
        for figure in (list_sessions_figure, append_flush_figure):
            database = server.database()
            yield figure(database, workdir)
            server.drop(database.name)
        database = server.database()
        yield load_figure(database, workdir, seconds)
    finally:
        server.cleanup()
