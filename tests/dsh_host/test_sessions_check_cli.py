"""`dsh sessions check [SESSION_ID] [--json] [--strict]`: one line per finding; exit 1 on a
violation, and on a note only under `--strict`; every reference log passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.log_check import PRE_PROVIDER

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


def noted_events() -> list[dict]:
    """A valid log whose aborted turn end carries more than its kind (a shape that cannot be resumed)."""
    end = {**good_events()[2], "seq": 1, "data": {"turn": 1, "reason": {"kind": "aborted", "step": 1}}}
    return [good_events()[0], end]


NOTE_MESSAGE = (
    "turn/end reason 'aborted' carries more than its kind"
    " (a shape from before provider routing: resuming or forking this log is not supported)"
)


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


def test_no_sessions_and_valid_sessions_pass_saying_what_was_checked(dsh_cli, store) -> None:
    assert dsh_cli("sessions", "check") == (0, "0 sessions, 0 source files: no problems\n", "")
    store("good", good_events())
    store("also-good", good_events())
    assert dsh_cli("sessions", "check") == (0, "2 sessions, 0 source files: no problems\n", "")
    assert dsh_cli("sessions", "check", "good") == (0, "1 session: no problems\n", "")
    assert dsh_cli("sessions", "check", "good", "--json") == (0, "", "")  # JSON lines are findings only


def test_each_violation_is_one_line_with_seq_and_rule_and_the_exit_code_is_1(dsh_cli, store) -> None:
    store("good", good_events())
    store("bad", bad_events())
    code, out, err = dsh_cli("sessions", "check")
    assert code == 1
    assert out.splitlines() == [
        "bad  seq 0  violation  turn-enclosure  user/message appended outside any open turn"
        " (every event must be turn-enclosed)",
        "bad  seq 1  violation  turn-nesting  turn/start expected turn 1, got 2",
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
            "kind": "violation",
            "rule": "turn-enclosure",
            "message": "user/message appended outside any open turn (every event must be turn-enclosed)",
        },
        {
            "session": "bad",
            "seq": 1,
            "kind": "violation",
            "rule": "turn-nesting",
            "message": "turn/start expected turn 1, got 2",
        },
    ]


def test_a_note_is_listed_and_exits_0_unless_strict(dsh_cli, store) -> None:
    store("good", good_events())
    store("noted", noted_events())
    line = f"noted  seq 1  note  seed-shape  {NOTE_MESSAGE}\n"
    assert dsh_cli("sessions", "check") == (0, line, "")
    assert dsh_cli("sessions", "check", "noted") == (0, line, "")
    assert dsh_cli("sessions", "check", "--strict") == (
        1,
        line,
        "dsh: error: 0 violation(s) and 1 note(s) in 1 of 2 session(s)\n",
    )
    assert dsh_cli("sessions", "check", "good", "--strict") == (0, "1 session: no problems\n", "")
    code, out, _ = dsh_cli("sessions", "check", "--json")
    assert code == 0
    assert json.loads(out) == {
        "session": "noted",
        "seq": 1,
        "kind": "note",
        "rule": "seed-shape",
        "message": NOTE_MESSAGE,
    }


def test_notes_beside_violations_are_listed_in_seq_order_and_the_error_counts_violations(dsh_cli, store) -> None:
    store("bad", bad_events())
    store("noted", noted_events())
    code, out, err = dsh_cli("sessions", "check")
    assert code == 1
    assert [line.split("  ")[:4] for line in out.splitlines()] == [
        ["bad", "seq 0", "violation", "turn-enclosure"],
        ["bad", "seq 1", "violation", "turn-nesting"],
        ["noted", "seq 1", "note", "seed-shape"],
    ]
    assert err == "dsh: error: 2 violation(s) in 1 of 2 session(s)\n"
    code, _, err = dsh_cli("sessions", "check", "--strict")
    assert (code, err) == (1, "dsh: error: 2 violation(s) and 1 note(s) in 2 of 2 session(s)\n")


def test_every_reference_log_passes_with_only_its_pre_provider_shapes_noted(
    dsh_cli, reference_logs: list[Path]
) -> None:
    """The whole corpus, imported and checked as a user would (the default plugins mounted)."""
    dsh_cli.plugins = None
    code, out, err = dsh_cli("sessions", "import", *map(str, reference_logs))
    assert (code, err) == (0, ""), err
    assert len(out.splitlines()) == len(reference_logs) == 80
    code, out, err = dsh_cli("sessions", "check")
    assert (code, err) == (0, ""), out
    noted: dict[str, list[int]] = {}
    for sid, seq, kind, rule, _ in (line.split("  ") for line in out.splitlines()):
        assert (kind, rule) == ("note", "seed-shape")
        noted.setdefault(sid, []).append(int(seq.removeprefix("seq ")))
    assert noted == PRE_PROVIDER
    code, _, err = dsh_cli("sessions", "check", "--strict")
    assert (code, err) == (1, "dsh: error: 0 violation(s) and 13 note(s) in 3 of 80 session(s)\n")


def test_an_unknown_session_is_an_error(dsh_cli) -> None:
    code, out, err = dsh_cli("sessions", "check", "missing")
    assert (code, out) == (1, "")
    assert err == 'dsh: error: session "missing" not found\n'


def test_session_ids_reach_the_terminal_inert(dsh_cli, store) -> None:
    evil = "evil\x1b]2;pwned\x07\x9b"
    store(evil, bad_events())
    code, out, _ = dsh_cli("sessions", "check")
    assert code == 1
    assert out.splitlines()[0].startswith("evil\\x1b]2;pwned\\x07\\x9b  seq 0  violation  turn-enclosure  ")
    code, out, _ = dsh_cli("sessions", "check", "--json")
    assert "\x1b" not in out and "\x9b" not in out
    assert json.loads(out.splitlines()[0])["session"] == evil


def test_mounted_plugins_add_their_rules_through_dsh_log_invariants(dsh_cli, store) -> None:
    """The compact plugin's `dsh_log_invariants` adds the compaction bracket; unmounted, it is absent."""
    store("compacted", compact_events())
    assert dsh_cli("sessions", "check") == (0, "1 session, 0 source files: no problems\n", "")
    dsh_cli.plugins = ["compact"]
    code, out, _ = dsh_cli("sessions", "check")
    assert code == 1
    assert out == "compacted  seq 2  violation  compact  successful compact/end requires one compact/summary\n"
