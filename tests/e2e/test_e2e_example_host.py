"""examples/automation_host.py, run as a reader would run it: two sessions, one referencing the other."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.e2e.e2e_support import PREFIX, clean_env, ok, run_command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "automation_host.py"
LINE = re.compile(r"^(research|summary): session (\w+) turn (\d) completed: (.+)$")


def test_the_example_host_runs_two_sessions_and_references_one_from_the_other(tmp_path, make_host):
    data = tmp_path / "data"
    done = ok(run_command([sys.executable, str(EXAMPLE), str(data)], env=clean_env(tmp_path), cwd=tmp_path))
    assert done.stderr == ""
    *turns, last = done.stdout.splitlines()
    assert last == "agents created: 2"
    parsed = [LINE.match(line).groups() for line in turns]
    assert [(label, turn) for label, _, turn, _ in parsed] == [("research", "1"), ("summary", "1"), ("summary", "2")]
    (_, research, _, first), (_, summary, _, answer), (_, again, _, _) = parsed
    assert summary == again != research
    assert first == "Scripted reply: List three risks of shipping on a Friday."
    assert 'referenced-session snapshot (1 session: "the risk review")' in answer

    # The mention became a snapshot of the research session in the summary's log.
    with make_host(data_dir=data) as host:
        assert {r.id for r in host.store.list_sessions()} == {research, summary}
        _, events = host.store.read_events(summary)
        message = next(e for e in events if e.type == "user/message")
    snapshot = message.data["content"][0]["text"]
    assert snapshot.startswith(PREFIX)
    assert f'"{research}"' in snapshot
    assert "List three risks of shipping on a Friday." in snapshot
