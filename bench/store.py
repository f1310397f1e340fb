"""Store benchmarks: cost follows the surface, not the log; listing and flushing stay near bare SQL.

Each figure is measured against a baseline taken in the same run on the same data:

- `read_surface_200k`: the query service's `read_surface` of a persisted session of 200,000
  events (2,000 on the surface) against a bare `SELECT` of exactly those 2,000 rows by key,
  each decoded with `json.loads`.
- `read_surface_400k_vs_200k`: the same read on 400,000 events (twice the chunks, same
  surface) against the 200,000-event time.
- `list_sessions_10k`: `list_sessions()` over 10,000 titled sessions against a bare
  `SELECT id, cwd, created_at, title`.
- `append_flush_1000`: `Session.append` of a 1,000-event turn plus `host.sessions.flush`, in
  events per second, against `executemany` of the same rows in one transaction into a table
  of the same layout.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.timing import Figure, interleaved
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import Event, SessionHeader
from dsh_host.session.surface import fold

SURFACE = 2_000
MESSAGES = 2 * (SURFACE - 1)  # one checkpoint replaces the first half: 1 + MESSAGES / 2 == SURFACE
TURNS = MESSAGES // 2  # a user and an assistant message each
PER_TURN = 6  # turn/start, user/message, step/start, assistant/message, step/end, turn/end
COMPACTION = 6  # turn/start, compact/start, compact/summary, checkpoint, compact/end, turn/end
TAIL_CHUNKS = 90  # chunks of each retained turn's step
USER = {"kind": "user"}
PROVENANCE = {"provider": "scripted", "model": "scripted-1"}


def start_host(home: Path) -> Host:
    return Host.start(load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": ""}, cwd=home))


def compacted_session(total: int) -> list[Event]:
    """A valid log of `total` events whose surface is a checkpoint plus a retained tail.

    Every assistant message lists its step's chunks as provenance, so chunks added
    to a retained turn would make its surface event bigger. Turns of the retained tail get
    TAIL_CHUNKS chunks each, whatever `total` is, and the compacted head takes the rest: a
    larger log has the same surface, byte for byte up to seq numbers.
    """
    chunks = total - TURNS * PER_TURN - COMPACTION
    head_turns = MESSAGES // 4  # turns whose two messages the checkpoint shadows
    head_chunks = chunks - (TURNS - head_turns) * TAIL_CHUNKS
    events: list[Event] = []

    def add(kind: str, data: Any, op: Any = None, sources: list[int] | None = None) -> int:
        events.append(Event(kind, len(events), 1_700_000_000_000 + len(events), data, op, sources))
        return len(events) - 1

    messages: list[int] = []
    for turn in range(1, TURNS + 1):
        add("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
        text = f"Question {turn}: what does the function on line {turn * 7} of the module do?"
        messages.append(add("user/message", {"content": [{"type": "text", "text": text}], "source": USER}, "append"))
        add("step/start", {"turn": turn, "step": 1})
        if turn <= head_turns:
            share = head_chunks // head_turns + (1 if turn <= head_chunks % head_turns else 0)
        else:
            share = TAIL_CHUNKS
        seqs = [
            add(
                "assistant/chunk",
                {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": f" token{i}"}},
            )
            for i in range(share)
        ]
        answer = [{"type": "text", "text": f"It parses the header of record {turn} and returns its fields."}]
        data = {
            "turn": turn,
            "step": 1,
            "content": answer,
            "provenance": PROVENANCE,
            "usage": {"inputTokens": 900},
        }
        messages.append(add("assistant/message", data, "append", seqs))
        add("step/end", {"turn": turn, "step": 1})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    turn = TURNS + 1
    shadowed = messages[: MESSAGES // 2]
    add("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    start = add("compact/start", {"turn": turn})
    summary = add(
        "compact/summary",
        {
            "summary": [{"type": "text", "text": "Summary of the first half."}],
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": shadowed,
            "shadowedTokenCount": 120_000,
            "provider": "scripted",
            "model": "scripted-1",
        },
    )
    add(
        "user/message",
        {
            "content": [{"type": "text", "text": "<summary>…</summary>"}],
            "source": {"kind": "plugin", "plugin": "compact"},
        },
        {"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
        [start, summary, *shadowed],
    )
    add("compact/end", {"turn": turn})
    add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    assert len(events) == total
    nodes = fold(events).nodes  # the log is valid, and its surface is what we want to read
    assert len(nodes) == SURFACE
    return events


def persist(host: Host, session_id: str, events: list[Event]) -> list[int]:
    header = SessionHeader(id=session_id, created_at=1_700_000_000_000, cwd="/bench")
    for start in range(0, len(events), 50_000):
        host.store.append(header, events[start : start + 50_000])
    return list(fold(events).nodes)


def sql_read(path: Path, session_id: str, seqs: list[int]):
    """The baseline: fetch exactly the surface rows by key and decode each with json.loads."""
    conn = sqlite3.connect(path)
    (pk,) = conn.execute("SELECT pk FROM sessions WHERE id = ?", (session_id.encode(),)).fetchone()
    keys = [(pk << 32) | seq for seq in seqs]
    statement = f"SELECT line FROM events WHERE key IN ({','.join('?' * len(keys))})"
    loads = json.loads

    def read() -> list[Any]:
        return [loads(line) for (line,) in conn.execute(statement, keys)]

    assert len(read()) == len(seqs)
    return read, conn


def read_surface_figures(workdir: Path) -> Iterator[Figure]:
    home = workdir / "surface"
    with start_host(home) as host:
        small = persist(host, "log-200k", compacted_session(200_000))
        large = persist(host, "log-400k", compacted_session(400_000))
    assert len(small) == len(large) == SURFACE
    with start_host(home) as host:  # a fresh host: neither session is live
        query = host.services.session_query
        loop = asyncio.new_event_loop()
        try:

            def read_surface(session_id: str) -> Any:
                snapshot = loop.run_until_complete(query.read_surface(session_id))
                assert len(snapshot.events) == SURFACE
                return snapshot

            baseline_read, conn = sql_read(host.store.path, "log-200k", small)
            try:
                baseline, t200, t400 = interleaved(
                    baseline_read,
                    lambda: read_surface("log-200k"),
                    lambda: read_surface("log-400k"),
                    rounds=10,
                )
            finally:
                conn.close()
        finally:
            loop.close()
    yield Figure.timed(
        "read_surface_200k",
        t200,
        baseline,
        target=2.0,
        note="session_query.read_surface of a persisted 200,000-event log (2,000 on the surface) vs a bare "
        "SELECT of those 2,000 rows by key + json.loads",
    )
    yield Figure.timed(
        "read_surface_400k_vs_200k",
        t400,
        t200,
        target=1.2,
        note="the same read on 400,000 events (twice the chunks, same surface) vs the 200,000-event read",
    )


def list_sessions_figure(workdir: Path) -> Figure:
    home = workdir / "listing"
    count = 10_000
    with start_host(home) as host:
        for i in range(count):
            header = SessionHeader(
                id=f"session-{i:05d}", created_at=1_700_000_000_000 + i * 1000, cwd=f"/work/p{i % 50}"
            )
            title = {
                "title": f"Refactor module {i} and its tests",
                "messageSeqs": [1],
                "source": {"kind": "fallback"},
            }
            host.store.append(
                header,
                [
                    Event("turn/start", 0, 0, {"turn": 1, "trigger": {"kind": "message", "source": USER}}),
                    Event(
                        "user/message",
                        1,
                        0,
                        {"content": [{"type": "text", "text": "x"}], "source": USER},
                        "append",
                    ),
                    Event("session/title", 2, 0, title),
                ],
            )
    with start_host(home) as host:
        query = host.services.session_query
        loop = asyncio.new_event_loop()
        conn = sqlite3.connect(host.store.path)
        try:

            def listing() -> None:
                records = loop.run_until_complete(query.list_sessions())
                assert len(records) == count and records[0].title

            def bare() -> None:
                assert len(conn.execute("SELECT id, cwd, created_at, title FROM sessions").fetchall()) == count

            # 15 rounds: each side's speed swings by up to 1.5x from round to round on a busy machine,
            # and the figure is the middle one of the round ratios.
            baseline, value = interleaved(bare, listing, rounds=15)
        finally:
            conn.close()
            loop.close()
    return Figure.timed(
        "list_sessions_10k",
        value,
        baseline,
        target=3.0,
        note="session_query.list_sessions over 10,000 titled sessions vs a bare SELECT id, cwd, created_at, title",
    )


def turn_events() -> list[tuple[str, dict[str, Any], str | None, list[int] | None]]:
    """A 1,000-event first turn: boundaries, a prompt, a request header, 993 chunks, the answer.

    Built once, outside the timed region: the figure is the cost of appending and flushing a
    turn's events, as the baseline is the cost of inserting its rows.
    """
    text = "Explain the store's schema and why the surface table exists."
    events: list[tuple[str, dict[str, Any], str | None, list[int] | None]] = [
        ("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": USER}}, None, None),
        ("user/message", {"content": [{"type": "text", "text": text}], "source": USER}, "append", None),
        ("step/start", {"turn": 1, "step": 1}, None, None),
        (
            "request/header",
            {"header": {"config": PROVENANCE, "system": "You are terse."}, "reason": "initial"},
            None,
            None,
        ),
    ]
    first_chunk = len(events)
    for i in range(993):
        chunk = {"type": "text-delta", "index": 0, "text": f" word{i}"}
        events.append(("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}, None, None))
    answer = [{"type": "text", "text": "The surface table keeps the current model history."}]
    data = {"turn": 1, "step": 1, "content": answer, "provenance": PROVENANCE}
    events.append(("assistant/message", data, "append", list(range(first_chunk, first_chunk + 993))))
    events.append(("step/end", {"turn": 1, "step": 1}, None, None))
    events.append(("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, None, None))
    return events


def append_turn(session, events) -> None:
    for kind, data, surface_op, sources in events:
        session.append(kind, data, surface_op=surface_op, sources=sources)


def append_flush_figure(workdir: Path) -> Figure:
    home = workdir / "append"
    events = turn_events()
    events_per_turn = len(events)
    with start_host(home) as host:
        loop = asyncio.new_event_loop()
        # The events table as the store made it (its indexes and triggers too, if it has any); the
        # rest of the schema (virtual search tables with their shadow tables) plays no part here.
        schema = [
            row[0]
            for row in sqlite3.connect(host.store.path).execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = 'events'"
            )
            if row[0]
        ]
        # The same rows, prebuilt, into a table of the same layout in a database set up the same way.
        sample = host.sessions.create("/bench", "sample")
        append_turn(sample, events)
        host.sessions.forget("sample")
        lines = [(e.type, e.to_line()) for e in sample.events]
        conn = sqlite3.connect(workdir / "baseline.sqlite3", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        for statement in schema:
            conn.execute(statement)
        batch = iter(range(1, 1_000_000))
        try:

            def append_and_flush() -> None:
                # A new session with a fresh random id: naming one would ask the store whether it is
                # taken, a read that is neither appending nor flushing.
                session = host.sessions.create("/bench")
                append_turn(session, events)
                assert session.seq == events_per_turn
                loop.run_until_complete(host.sessions.flush(session))
                host.sessions.forget(session.id)

            def executemany() -> None:
                pk = next(batch)
                rows = [((pk << 32) | seq, kind, line) for seq, (kind, line) in enumerate(lines)]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO events (key, type, line) VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")

            append_and_flush()  # warm up the statement caches
            executemany()
            # Alternating rounds, so load on a shared machine drifting during the run weighs on both.
            baseline, value = interleaved(executemany, append_and_flush, rounds=15, repeat=3)
        finally:
            conn.close()
            loop.close()
    return Figure.timed(
        "append_flush_1000",
        value,
        baseline,
        per=events_per_turn,
        unit="events/s",
        target=3.0,
        note="Session.append of a prebuilt 1,000-event turn + host.sessions.flush vs executemany of the same rows in "
        "one transaction into the same table layout",
    )


def figures(workdir: Path) -> Iterator[Figure]:
    yield from read_surface_figures(workdir)
    yield list_sessions_figure(workdir)
    yield append_flush_figure(workdir)
