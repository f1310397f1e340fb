"""`dsh sessions check [SESSION_ID] [--json]`: one line per violation, exit 1 when any."""

from __future__ import annotations

import json

import pytest

# The logs imported here break invariants on purpose.
pytestmark = pytest.mark.foreign_logs

USER = {"kind": "user"}


def header(session_id: str) -> dict:
    return {"type": "session", "version": 0, "id": session_id, "createdAt": 0, "delegationDepth": 0}


def good_events() -> list[dict]:
    return [
        {
            "type": "turn/start",
            "seq": 0,
            "time": 0,
            "data": {"turn": 1, "trigger": {"kind": "message", "source": USER}},
        },
        {"type": "user/message", "seq": 1, "time": 0, "data": {"content": [], "source": USER}, "surfaceOp": "append"},
        {"type": "turn/end", "seq": 2, "time": 0, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]


def bad_events() -> list[dict]:
    """A prompt outside any turn, then a turn numbered 2 first."""
    return [
        {"type": "user/message", "seq": 0, "time": 0, "data": {"content": [], "source": USER}, "surfaceOp": "append"},
        {
            "type": "turn/start",
            "seq": 1,
            "time": 0,
            "data": {"turn": 2, "trigger": {"kind": "message", "source": USER}},
        },
        {"type": "turn/end", "seq": 2, "time": 0, "data": {"turn": 2, "reason": {"kind": "completed"}}},
    ]


def compact_events() -> list[dict]:
    """A successful compact/end with no compact/summary (only the compact plugin's rules see it)."""
    return [
        good_events()[0],
        {"type": "compact/start", "seq": 1, "time": 0, "data": {"turn": 1}},
        {"type": "compact/end", "seq": 2, "time": 0, "data": {"turn": 1}},
        {"type": "turn/end", "seq": 3, "time": 0, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]


@pytest.fixture
def store(dsh_cli, tmp_path):
    """`store(session_id, events)` imports a log through `dsh sessions import`."""
    paths = iter(range(1_000))

    def run(session_id: str, events: list[dict]) -> None:
        path = tmp_path / f"log-{next(paths)}.jsonl"
        lines = [header(session_id), *events]
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
        assert dsh_cli("sessions", "import", str(path))[0] == 0

    return run


def test_no_sessions_and_valid_sessions_pass(dsh_cli, store) -> None:
    assert dsh_cli("sessions", "check") == (0, "", "")
    store("good", good_events())
    assert dsh_cli("sessions", "check") == (0, "", "")
    assert dsh_cli("sessions", "check", "good", "--json") == (0, "", "")


def test_each_violation_is_one_line_with_seq_and_rule_and_the_exit_code_is_1(dsh_cli, store) -> None:
    store("good", good_events())
    store("bad", bad_events())
    code, out, err = dsh_cli("sessions", "check")
    assert code == 1
    assert out.splitlines() == [
        "bad  seq 0  turn-enclosure  user/message appended outside any open turn (every event must be turn-enclosed)",
        "bad  seq 1  turn-nesting  turn/start expected turn 1, got 2",
    ]
    assert err == "dsh: error: 2 violation(s) in 1 of 2 session(s)\n"
    assert dsh_cli("sessions", "check", "good")[0] == 0
    assert dsh_cli("sessions", "check", "bad")[0] == 1


def test_json_lines_parse_back(dsh_cli, store) -> None:
    store("bad", bad_events())
    code, out, _ = dsh_cli("sessions", "check", "--json")
    assert code == 1
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "session": "bad",
            "seq": 0,
            "rule": "turn-enclosure",
            "message": "user/message appended outside any open turn (every event must be turn-enclosed)",
        },
        {"session": "bad", "seq": 1, "rule": "turn-nesting", "message": "turn/start expected turn 1, got 2"},
    ]


def test_an_unknown_session_is_an_error(dsh_cli) -> None:
    code, out, err = dsh_cli("sessions", "check", "missing")
    assert (code, out) == (1, "")
    assert err == 'dsh: error: session "missing" not found\n'


def test_session_ids_reach_the_terminal_inert(dsh_cli, store) -> None:
    evil = "evil\x1b]2;pwned\x07\x9b"
    store(evil, bad_events())
    code, out, _ = dsh_cli("sessions", "check")
    assert code == 1
    assert out.splitlines()[0].startswith("evil\\x1b]2;pwned\\x07\\x9b  seq 0  turn-enclosure  ")
    code, out, _ = dsh_cli("sessions", "check", "--json")
    assert "\x1b" not in out and "\x9b" not in out
    assert json.loads(out.splitlines()[0])["session"] == evil


def test_mounted_plugins_add_their_rules_through_dsh_log_invariants(dsh_cli, store) -> None:
    """The compact plugin's `dsh_log_invariants` adds the compaction bracket; unmounted, it is absent."""
    store("compacted", compact_events())
    assert dsh_cli("sessions", "check") == (0, "", "")
    dsh_cli.plugins = ["compact"]
    code, out, _ = dsh_cli("sessions", "check")
    assert code == 1
    assert out == "compacted  seq 2  compact  successful compact/end requires one compact/summary\n"
