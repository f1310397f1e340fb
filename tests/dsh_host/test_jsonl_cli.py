"""`dsh sessions import|export|list|show`: validation before import, errors, output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsh_host.session.jsonl import InvalidLog, parse_log, read_log_file
from dsh_host.session.lossless import MAX_DEPTH

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs

HEADER = {
    "type": "session",
    "version": 0,
    "id": "imported",
    "createdAt": 1000,
    "cwd": "/w",
    "delegationDepth": 0,
}


def line(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def good_events(L) -> list[dict]:
    return [
        L.raw("turn/start", 0, {"turn": 1, "trigger": {"kind": "message", "source": L.USER}}),
        L.user(1, "hello"),
        L.chunk(2),
        L.assistant(3, "hi", sources=[2]),
        L.raw("turn/end", 4, {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def write_log(path: Path, header: dict, events: list, *, raw_lines: dict[int, str] | None = None) -> Path:
    """Write a JSONL log; `raw_lines` replaces given 1-based lines with raw text."""
    lines = [line(header), *(line(e) for e in events)]
    for number, text in (raw_lines or {}).items():
        if number <= len(lines):
            lines[number - 1] = text
        else:
            lines.append(text)
    path.write_text("".join(f"{text}\n" for text in lines), "utf-8")
    return path


def stored_ids(make_host, home: Path) -> list[str]:
    with make_host(data_dir=home) as host:
        return [r.id for r in host.store.list_sessions()]


def test_import_then_export_round_trips(dsh_cli, tmp_path, log_builder):
    source = write_log(tmp_path / "in.jsonl", HEADER, good_events(log_builder))
    code, out, err = dsh_cli("sessions", "import", str(source))
    assert (code, err) == (0, "")
    assert out == "imported imported (5 events)\n"
    code, out, err = dsh_cli("sessions", "export", "imported")
    assert (code, err) == (0, "")
    assert out == source.read_text("utf-8")


@pytest.mark.parametrize(
    ("number", "text", "message"),
    [
        (3, '{"type":"user/message","seq":1', "not valid JSON"),
        (3, "not json at all", "not valid JSON"),
        (
            3,
            '{"type":"user/message","seq":1,"time":0,"data":{"x":NaN},"surfaceOp":"append"}',
            "NaN is not JSON",
        ),
        (3, '{"type":"custom/x","seq":1,"time":0,"data":{"x":-0.0}}', "-0.0 is not lossless JSON"),
        (3, '{"type":"custom/x","seq":1,"time":0,"data":{},"id":"e1"}', "invalid event envelope"),
        (3, '{"type":"custom/x","seq":7,"time":0,"data":{}}', "seq 7 is not contiguous; expected 1"),
        (3, '{"type":"user/message","seq":1,"time":0,"data":{}}', "requires a surfaceOp marker"),
        (
            3,
            '{"type":"user/message","seq":1,"time":0,"data":{},"surfaceOp":{"op":"replace","start":5,"end":5},'
            '"sourceEventSeqs":[0]}',
            "start seq 5 not found",
        ),
        (3, '{"type":"request/header-delta","seq":1,"time":0,"data":{}}', "legacy event type"),
        (3, "", "empty line"),
        (6, '{"type":"custom/x","seq":5,"time":0,"data":{}}', "seq 5 is not contiguous; expected 4"),
        (
            1,
            '{"type":"session","version":1,"id":"imported","createdAt":0}',
            "unsupported session format version",
        ),
        (1, '{"type":"turn/start","seq":0,"time":0,"data":{}}', "first line is not a session header"),
        (
            1,
            '{"type":"session","version":0,"id":"imported","createdAt":0,"delegationDepth":-1}',
            "delegationDepth",
        ),
    ],
)
def test_a_bad_line_names_the_file_and_line_and_imports_nothing_of_that_file(
    dsh_cli, make_host, tmp_path, log_builder, number, text, message
):
    L = log_builder
    bad = write_log(tmp_path / "bad.jsonl", HEADER, good_events(L), raw_lines={number: text})
    other_header = {**HEADER, "id": "fine"}
    good = write_log(tmp_path / "good.jsonl", other_header, good_events(L))

    code, out, err = dsh_cli("sessions", "import", str(bad), str(good))

    assert code == 1
    first, last = err.splitlines()
    assert first.startswith(f"dsh: error: {bad}:{number}: ")
    assert message in first
    assert last == "dsh: error: 1 of 2 file(s) not imported"
    assert out == "imported fine (5 events)\n"
    assert stored_ids(make_host, dsh_cli.home) == ["fine"]


def test_a_torn_final_line_is_refused(dsh_cli, make_host, tmp_path, log_builder):
    path = write_log(tmp_path / "torn.jsonl", HEADER, good_events(log_builder))
    path.write_text(path.read_text("utf-8") + '{"type":"turn/start"', "utf-8")
    code, _, err = dsh_cli("sessions", "import", str(path))
    assert code == 1
    assert err.splitlines()[0] == f"dsh: error: {path}:7: torn final line (no newline)"
    assert stored_ids(make_host, dsh_cli.home) == []


def test_an_empty_file_and_bad_bytes_are_refused(dsh_cli, make_host, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(line(HEADER).encode() + b"\n\xff\xfe\n")
    missing = tmp_path / "missing.jsonl"
    code, _, err = dsh_cli("sessions", "import", str(empty), str(binary), str(missing))
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"dsh: error: {empty}: empty or header-less session log"
    assert lines[1].startswith(f"dsh: error: {binary}: not valid UTF-8 at byte ")
    assert lines[2].startswith(f"dsh: error: {missing}: ")
    assert lines[3] == "dsh: error: 3 of 3 file(s) not imported"
    assert stored_ids(make_host, dsh_cli.home) == []


def test_importing_an_existing_id_needs_replace(dsh_cli, tmp_path, log_builder):
    L = log_builder
    first = write_log(tmp_path / "one.jsonl", HEADER, good_events(L))
    second = write_log(tmp_path / "two.jsonl", {**HEADER, "createdAt": 2000}, [L.user(0, "replacement")])
    assert dsh_cli("sessions", "import", str(first))[0] == 0

    code, out, err = dsh_cli("sessions", "import", str(second))
    assert code == 1 and out == ""
    assert "session 'imported' already exists (use --replace to overwrite it)" in err.splitlines()[0]
    assert dsh_cli("sessions", "export", "imported")[1] == first.read_text("utf-8")

    code, out, err = dsh_cli("sessions", "import", "--replace", str(second))
    assert (code, err) == (0, "")
    assert dsh_cli("sessions", "export", "imported")[1] == second.read_text("utf-8")


def test_export_of_an_unknown_id(dsh_cli):
    code, out, err = dsh_cli("sessions", "export", "x")
    assert (code, out, err) == (1, "", 'dsh: error: session "x" not found\n')


def test_export_to_a_file_and_headers_without_delegation_depth(dsh_cli, tmp_path, log_builder):
    header = {k: v for k, v in HEADER.items() if k != "delegationDepth"}
    source = write_log(tmp_path / "in.jsonl", header, good_events(log_builder))
    assert dsh_cli("sessions", "import", str(source))[0] == 0
    target = tmp_path / "out.jsonl"
    assert dsh_cli("sessions", "export", "imported", "--output", str(target)) == (0, "", "")
    exported = target.read_text("utf-8").splitlines(keepends=True)
    assert json.loads(exported[0]) == {**header, "delegationDepth": 0}
    assert exported[1:] == source.read_text("utf-8").splitlines(keepends=True)[1:]


def test_import_keeps_unknown_types_and_ids_that_are_not_path_safe(dsh_cli, tmp_path, log_builder):
    L = log_builder
    odd = '../../"quoted"\nnew line\x1b[31m'
    events = [
        L.raw("approval/asked", 0, {"id": "a", "toolName": "bash"}),
        L.user(1),
        L.raw("hook/result", 2, {}),
    ]
    source = write_log(tmp_path / "odd.jsonl", {**HEADER, "id": odd}, events)
    code, out, _ = dsh_cli("sessions", "import", str(source))
    assert code == 0
    assert "\x1b" not in out and "\n" not in out.rstrip("\n")  # control characters escaped for the terminal
    assert dsh_cli("sessions", "export", odd)[1] == source.read_text("utf-8")
    assert {p.name for p in dsh_cli.home.iterdir()} <= {
        "sessions.sqlite3",
        "sessions.sqlite3-wal",
        "sessions.sqlite3-shm",
    }


def test_list_and_show(dsh_cli, tmp_path, log_builder):
    L = log_builder
    events = [
        *good_events(L),
        L.raw(
            "session/title",
            5,
            {"title": "Greeting \x1b]0;x\x07", "messageSeqs": [1], "source": {"kind": "fallback"}},
        ),
        L.user(6, "summary", op=L.replace(1, 3), sources=[1, 3]),
    ]
    source = write_log(tmp_path / "in.jsonl", HEADER, events)
    assert dsh_cli("sessions", "import", str(source))[0] == 0

    code, out, err = dsh_cli("sessions", "list", "--json")
    assert (code, err) == (0, "")
    assert [json.loads(x) for x in out.splitlines()] == [
        {
            "id": "imported",
            "createdAt": 1000,
            "cwd": "/w",
            "title": "Greeting \x1b]0;x\x07",
            "lastActivityAt": 0,  # the time of its last event (a test log's events are at 0)
            "live": False,
            "persisted": True,
        }
    ]
    code, out, _ = dsh_cli("sessions", "list")
    assert code == 0 and "imported" in out and "\x1b" not in out and "\x07" not in out

    code, out, _ = dsh_cli("sessions", "show", "imported", "--surface", "--json")
    assert code == 0
    assert [json.loads(x)["seq"] for x in out.splitlines()] == [6]
    code, out, _ = dsh_cli("sessions", "show", "imported", "--json")
    assert [json.loads(x) for x in out.splitlines()] == events
    code, out, _ = dsh_cli("sessions", "show", "imported")
    assert code == 0 and "imported" in out and "\x1b" not in out

    code, out, err = dsh_cli("sessions", "show", "nope")
    assert (code, out, err) == (1, "", 'dsh: error: session "nope" not found\n')


def test_a_store_that_is_not_ours_is_a_clear_error_and_left_alone(dsh_cli, tmp_path):
    dsh_cli.home.mkdir()
    db = dsh_cli.home / "sessions.sqlite3"
    db.write_bytes(b"definitely not sqlite" * 100)
    code, out, err = dsh_cli("sessions", "list")
    assert code == 1 and out == ""
    assert err == f"dsh: error: {db} is not a dsh session store (not an SQLite database); it was left untouched\n"
    assert db.read_bytes() == b"definitely not sqlite" * 100


def test_parse_log_directly(log_builder):
    lines = [line(HEADER) + "\n", *(line(e) + "\n" for e in good_events(log_builder))]
    parsed = parse_log(lines, name="mem")
    assert parsed.header.id == "imported"
    assert [e.seq for e in parsed.events] == [0, 1, 2, 3, 4]
    with pytest.raises(InvalidLog, match=r"^mem:3: "):
        parse_log([*lines[:2], "[]\n"], name="mem")
    with pytest.raises(InvalidLog, match="empty or header-less"):
        parse_log([], name="mem")


def test_read_log_file_accepts_a_header_only_log(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(line(HEADER) + "\n", "utf-8")
    parsed = read_log_file(path)
    assert parsed.events == [] and parsed.header.created_at == 1000


# --- deep nesting ----------------------------------------------------------------------------------


def deep_log(path: Path, levels: int) -> Path:
    """A log whose third line carries data nested `levels` deep (written without recursion)."""
    header = {**HEADER, "id": "deep"}
    turn = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}
    data = "[" * levels + "]" * levels
    lines = [
        line(header),
        line({"type": "turn/start", "seq": 0, "time": 0, "data": turn}),
        '{"type":"custom/deep","seq":1,"time":0,"data":' + data + "}",
        line({"type": "turn/end", "seq": 2, "time": 0, "data": {"turn": 1, "reason": {"kind": "completed"}}}),
    ]
    path.write_text("".join(f"{text}\n" for text in lines), "utf-8")
    return path


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1_500, 5_000])
def test_a_line_nested_too_deeply_is_one_error_line_and_imports_nothing(
    dsh_cli, make_host, tmp_path, log_builder, levels
):
    kept = write_log(tmp_path / "kept.jsonl", HEADER, good_events(log_builder))
    assert dsh_cli("sessions", "import", str(kept))[0] == 0
    path = deep_log(tmp_path / "deep.jsonl", levels)

    code, out, err = dsh_cli("sessions", "import", str(path))

    assert (code, out) == (1, "")
    assert err.endswith("\n") and err.count("\n") == 1  # one line, no traceback
    assert err.startswith(f"dsh: error: {path}:3: ")
    assert f"{MAX_DEPTH} levels" in err
    assert stored_ids(make_host, dsh_cli.home) == ["imported"]
    assert dsh_cli("sessions", "export", "imported")[1] == kept.read_text("utf-8")


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5_000])
def test_reading_a_log_nested_too_deeply_names_the_line(tmp_path, levels):
    path = deep_log(tmp_path / "deep.jsonl", levels)
    with pytest.raises(InvalidLog, match=rf"^{re.escape(str(path))}:3: .*{MAX_DEPTH} levels"):
        read_log_file(path)


def test_data_nested_to_the_limit_imports_and_exports_unchanged(dsh_cli, tmp_path):
    path = deep_log(tmp_path / "deep.jsonl", MAX_DEPTH)
    assert read_log_file(path).events[1].data == json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert dsh_cli("sessions", "import", str(path)) == (0, "imported deep (3 events)\n", "")
    assert dsh_cli("sessions", "export", "deep")[1] == path.read_text("utf-8")
