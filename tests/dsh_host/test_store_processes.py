"""Reliability with real processes: SIGKILL mid-turn, and concurrent writers and readers, on every
store (the writers and readers select theirs through the configuration file `DSH_CONFIG` names)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import event_from_json
from dsh_host.session.repair import interrupted_turn_closers
from dsh_host.session.surface import fold
from tests.store_backends import store_config

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

WRITER = Path(__file__).with_name("store_writer.py")
TIMEOUT = 60


@pytest.fixture
def config(store_backend, tmp_path) -> Path:
    """The configuration file selecting each store in turn."""
    return store_config(tmp_path / "dsh.toml", store_backend)


def spawn(config: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WRITER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DSH_CONFIG": str(config)},
    )


def start_host(home: Path, config: Path) -> Host:
    env = {"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": "", "DSH_CONFIG": str(config)}
    return Host.start(load_config(env=env, cwd=home))


def read_line(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    if not line:
        proc.wait(TIMEOUT)
        pytest.fail(f"writer exited with {proc.returncode}: {proc.stderr.read()}")
    return line.strip()


def check_every_session(host: Host) -> dict[str, list]:
    """Every stored line parses, seqs are contiguous, and the stored surface equals the fold."""
    logs = {}
    for row in host.store.list_sessions():
        _, lines = host.store.read_lines(row.id)
        events = [event_from_json(json.loads(line), expected_seq=i) for i, line in enumerate(lines)]
        surface = host.store.read_surface(row.id)
        assert surface.captured_through_seq == len(events) - 1
        assert [e["seq"] for e in surface.events] == list(fold(events).nodes)
        logs[row.id] = events
    return logs


def test_a_writer_killed_mid_turn_twenty_times(tmp_path, config):
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    home = tmp_path / "home"
    session_ids = ["w0", "w1", "w2"]
    for iteration in range(20):
        session_id = session_ids[iteration % len(session_ids)]
        k = rng.randint(1, 40)
        race = rng.random() < 0.5  # let the writer go on, so the kill lands while it writes
        proc = spawn(config, "turns", str(home), session_id)
        try:
            seen = 0
            while True:
                line = read_line(proc)
                seen += 1
                if seen >= k and line.startswith("open "):
                    break
                proc.stdin.write("\n")
                proc.stdin.flush()
            if race:
                proc.stdin.write("\n")
                proc.stdin.flush()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(TIMEOUT)
            proc.stdin.close()
            proc.stdout.close()
            proc.stderr.close()
        context = f"seed {seed}, iteration {iteration}, k {k}, race {race}"
        assert proc.returncode == -signal.SIGKILL, context
        flushed_through = int(line.split()[1])

        with start_host(home, config) as host:
            logs = check_every_session(host)
            events = logs[session_id]
            if race:
                assert len(events) >= flushed_through, context
            else:
                assert len(events) == flushed_through, context
                assert events[-1].type != "turn/end", context
            closers = interrupted_turn_closers(events)
            _, committed = host.store.read_lines(session_id)

            session = asyncio.run(host.sessions.resume(session_id))

            appended = [json.loads(e.to_line()) for e in session.events[len(events) :]]
            assert appended == closers, context
            if closers:
                assert closers[-1]["data"]["reason"] == {"kind": "interrupted"}
                step_open = any(e.type == "step/start" for e in events[_last_turn_start(events) :]) and not any(
                    e.type == "step/end" for e in events[_last_turn_start(events) :]
                )
                assert ("step/end" in [c["type"] for c in closers]) == step_open, context
            else:
                assert race, context  # only a racing writer can have closed its turn
            _, after = host.store.read_lines(session_id)
            assert after[: len(committed)] == committed, context  # committed events are never rewritten
            assert after == [e.to_line() for e in session.events]
            assert interrupted_turn_closers(session.events) == []
    with start_host(home, config) as host:
        logs = check_every_session(host)
        assert set(logs) == set(session_ids)
        for events in logs.values():
            ends = [e for e in events if e.type == "turn/end"]
            assert ends and all(e.data["reason"]["kind"] in ("completed", "interrupted") for e in ends)


def _last_turn_start(events) -> int:
    return max(i for i, e in enumerate(events) if e.type == "turn/start")


@pytest.mark.foreign_logs  # a hand-built log (no turns), not one dsh wrote
def test_two_writers_and_a_reader_at_once(tmp_path, config):
    home = tmp_path / "home"
    with start_host(home, config) as host:
        assert host.store.list_sessions() == []  # creates the database before the race starts
    count = 3000
    reader = spawn(config, "read", str(home))
    writers = []
    try:
        assert read_line(reader) == "ready"
        writers = [
            spawn(config, "append", str(home), sid, str(count), str(batch)) for sid, batch in (("a", 2), ("b", 3))
        ]
        for writer in writers:
            out, err = writer.communicate(timeout=TIMEOUT)
            assert writer.returncode == 0, err
            assert out.split() == ["done", str(count)]
        out, err = reader.communicate("", timeout=TIMEOUT)
        assert reader.returncode == 0, err
        assert err == ""
        words = out.split()
        assert words[0] == "reads" and words[2] == "rounds" and int(words[3]) >= 1, out
        print(f"reader: {out.strip()} while the writers ran")
    finally:
        for proc in [reader, *writers]:
            if proc.poll() is None:
                proc.kill()
                proc.wait(TIMEOUT)
    with start_host(home, config) as host:
        logs = check_every_session(host)
        assert {sid: len(events) for sid, events in logs.items()} == {"a": count, "b": count}
        for sid, events in logs.items():
            contexts = [e for e in events if e.type == "context/message"]
            assert [e.data["content"][0]["text"] for e in contexts] == [f"{sid} {i}" for i in range(1, count - 1, 10)]
