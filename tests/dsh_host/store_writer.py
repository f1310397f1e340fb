"""A separate process for the store's reliability tests (run with `sys.executable`).

    store_writer.py turns DATA_DIR SESSION_ID
        Resume SESSION_ID (or create it) and append canonical turns forever: turn/start,
        user/message, step/start, request/header, many assistant/chunk batches,
        assistant/message, tool/call, tool/result, step/end, turn/end. After each flushed
        batch print `open <next seq>` (the turn is still open) or `closed <next seq>`, then
        wait for one line on stdin before going on, so the parent can SIGKILL it at a known
        point mid-turn, or answer and kill it while it writes.

    store_writer.py append DATA_DIR SESSION_ID N BATCH
        Create SESSION_ID and append exactly N events (a turn of chunks), flushing every
        BATCH events, one transaction each; print `done <N>`.

    store_writer.py read DATA_DIR
        List sessions and read every surface and log in a loop, checking each observation,
        until stdin closes; print `ready` first and `reads <count> rounds <count>` last.
        Exit 1 on any inconsistency.

The host is built exactly as the `dsh` command builds it, with no plugins and DSH_HOME set (and
the configuration file DSH_CONFIG names, which selects the store).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path

from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import event_from_json
from dsh_host.session.surface import fold

USER = {"kind": "user"}
PLUGIN = {"kind": "plugin", "plugin": "store-writer"}
PROVENANCE = {"provider": "scripted", "model": "scripted-1"}
CHUNK_BATCHES = 12
CHUNKS_PER_BATCH = 7


def start_host(data_dir: str) -> Host:
    env = {"DSH_HOME": data_dir, "DSH_LOAD_PLUGINS": ""}
    if os.environ.get("DSH_CONFIG"):  # the store the parent chose
        env["DSH_CONFIG"] = os.environ["DSH_CONFIG"]
    return Host.start(load_config(env=env, cwd=Path(data_dir)))


def report(line: str, *, wait: bool = True) -> None:
    print(line, flush=True)
    if wait and not sys.stdin.readline():
        raise SystemExit(0)  # the parent closed our stdin: stop cleanly


async def write_turns(host: Host, session_id: str) -> None:
    registry = host.sessions
    session = await registry.resume(session_id) if host.store.has(session_id) else registry.create("/work", session_id)
    turn = session.last_turn_number()
    while True:
        turn += 1
        session.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
        text = f"turn {turn}: please write a long answer"
        session.append(
            "user/message", {"content": [{"type": "text", "text": text}], "source": USER}, surface_op="append"
        )
        await registry.flush(session)  # titles an untitled session in the same batch
        report(f"open {session.seq}")
        session.append("step/start", {"turn": turn, "step": 1})
        session.append("request/header", {"header": {"config": PROVENANCE, "system": "s"}, "reason": "initial"})
        await registry.flush(session)
        report(f"open {session.seq}")
        chunk_seqs = []
        for batch in range(CHUNK_BATCHES):
            for i in range(CHUNKS_PER_BATCH):
                chunk = {"type": "text-delta", "index": 0, "text": f"[{batch}.{i}] " + "x" * (i * 40)}
                chunk_seqs.append(session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk}).seq)
            await registry.flush(session)
            report(f"open {session.seq}")
        call_id = f"call-{turn}"
        content = [
            {"type": "text", "text": "answer"},
            {"type": "tool-call", "id": call_id, "name": "read", "arguments": "{}"},
        ]
        data = {"turn": turn, "step": 1, "content": content, "provenance": PROVENANCE}
        session.append("assistant/message", data, surface_op="append", sources=chunk_seqs)
        await registry.flush(session)
        report(f"open {session.seq}")
        call = session.append(
            "tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "read", "arguments": "{}"}
        )
        await registry.flush(session)
        report(f"open {session.seq}")
        result = {
            "turn": turn,
            "step": 1,
            "callId": call_id,
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
        }
        session.append("tool/result", result, surface_op="append", sources=[call.seq])
        session.append("step/end", {"turn": turn, "step": 1})
        await registry.flush(session)
        report(f"open {session.seq}")
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        await registry.flush(session)
        report(f"closed {session.seq}")


async def append_events(host: Host, session_id: str, count: int, batch: int) -> None:
    registry = host.sessions
    session = registry.create("/work", session_id)
    for i in range(count):
        if i == 0:
            session.append("turn/start", {"turn": 1, "trigger": {"kind": "injection", "source": PLUGIN}})
        elif i == count - 1:
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        elif i % 10 == 1:
            content = [{"type": "text", "text": f"{session_id} {i}"}]
            session.append("context/message", {"content": content, "source": PLUGIN}, surface_op="append")
        else:
            chunk = {"type": "text-delta", "index": 0, "text": f"{i}"}
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
        if session.seq % batch == 0:
            await registry.flush(session)
    await registry.flush(session)
    report(f"done {session.seq}", wait=False)


def check_session(host: Host, session_id: str) -> None:
    header, lines = host.store.read_lines(session_id)
    events = [event_from_json(json.loads(line), expected_seq=i) for i, line in enumerate(lines)]
    surface = host.store.read_surface(session_id)
    assert surface.header.id == header.id == session_id
    # The surface is read in its own transaction, so it may be newer than the log read above.
    assert surface.captured_through_seq is not None and surface.captured_through_seq >= len(events) - 1
    nodes = [e["seq"] for e in surface.events]
    if surface.captured_through_seq == len(events) - 1:
        assert nodes == list(fold(events).nodes), (nodes, session_id)


async def read_loop(host: Host) -> None:
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    query = host.services.session_query
    report("ready", wait=False)
    rounds = reads = 0
    while not stop.is_set():
        for record in await query.list_sessions():
            snapshot = await query.read_surface(record.id)
            assert snapshot.header.id == record.id
            check_session(host, record.id)
            reads += 1
        rounds += 1
    report(f"reads {reads} rounds {rounds}", wait=False)


def main(argv: list[str]) -> int:
    mode, data_dir = argv[0], argv[1]
    with start_host(data_dir) as host:
        if mode == "turns":
            asyncio.run(write_turns(host, argv[2]))
        elif mode == "append":
            asyncio.run(append_events(host, argv[2], int(argv[3]), int(argv[4])))
        elif mode == "read":
            asyncio.run(read_loop(host))
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
