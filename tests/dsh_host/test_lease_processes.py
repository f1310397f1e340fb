"""One driver per session with real `dsh run` processes, on every store: the race of two racers
(`tests/lease_race.py`, a few rounds here), eight racers that queue, and a driver killed mid-turn
whose lease dies with it."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from dsh_host.log import check_log
from tests.dsh_host.sse_server import Reply, SSEServer
from tests.lease_race import OK, TIMEOUT, RaceStore, answer, prepare, race, spawn
from tests.store_backends import SqliteBackend

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and flock are POSIX")

ROUNDS = 2


@pytest.fixture
def race_store(store_backend) -> RaceStore:
    """Each store in turn, as the racing processes reach it."""
    if isinstance(store_backend, SqliteBackend):
        return RaceStore.sqlite()
    return RaceStore.postgres(store_backend.database.dsn())


@pytest.mark.parametrize("wait", [False, True], ids=["refused", "queued"])
async def test_two_racers_give_one_turn_and_one_refusal_or_two_turns_in_turn(race_store, tmp_path, wait):
    outcomes = await race(race_store, tmp_path, ROUNDS, wait=wait, report=print)
    assert outcomes == Counter({OK: ROUNDS})


async def test_eight_racers_that_wait_each_run_their_turn(race_store, tmp_path):
    run = await prepare(race_store, tmp_path / "run", base_url=None)  # the keyless model
    racers = [await spawn(run, f"racer {i}", wait=True) for i in range(8)]
    codes = [await asyncio.wait_for(racer.done, TIMEOUT) for racer in racers]

    assert codes == [0] * 8, [racer.stderr for racer in racers]
    for racer in racers:
        assert racer.stderr[-1] == f"session: {run.session_id}"
        assert not [line for line in racer.stderr if "error" in line or "warning" in line], racer.stderr
    header, events = await run.read_events()
    assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == ["completed"] * 9
    prompts = [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
    assert sorted(prompts[1:]) == [f"racer {i}" for i in range(8)]
    assert not check_log(header, events)


async def test_a_driver_killed_mid_turn_leaves_the_session_to_the_next_at_once(race_store, tmp_path):
    async with SSEServer() as server:
        run = await prepare(race_store, tmp_path / "run", server.base_url)
        server.replies.append(Reply(stall_first=True))  # the model never answers the first driver
        killed = await spawn(run, "killed mid-turn", wait=False)
        await asyncio.wait_for(server.stalled.wait(), TIMEOUT)  # it holds the lease, its turn open
        killed.process.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(killed.done, TIMEOUT) == -signal.SIGKILL
        _, events = await run.read_events()
        kinds = [e.type for e in events]
        assert kinds.count("turn/start") == 2 and kinds.count("turn/end") == 1  # the killed turn is open

        released = asyncio.Event()
        released.set()
        server.replies.append(answer("the next driver's answer", released))
        following = await spawn(run, "the next driver", wait=False)  # no --wait: it must not be refused
        assert await asyncio.wait_for(following.done, TIMEOUT) == 0, following.stderr
        assert following.stdout == ["the next driver's answer"]

    header, events = await run.read_events()
    assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == [
        "completed",
        "interrupted",
        "completed",
    ]
    assert not check_log(header, events)


def test_the_race_script_prints_its_counts(tmp_path: Path):
    """`python -m tests.lease_race` is what the issue's figures come from: its last line is JSON counts."""
    import json
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "tests.lease_race", "--runs", "1"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "run 1/1: ok"
    assert json.loads(lines[-1]) == {"store": "sqlite", "wait": False, "runs": 1, "ok": 1, "failures": {}}
