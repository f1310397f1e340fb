"""`dsh sessions search`, and the progress bar the CLI draws for a store's first-open indexing."""

from __future__ import annotations

import io
import json

import pytest

from dsh_host.cli.progress_bar import drawing_progress
from dsh_host.progress import progress_reporter, report_progress
from dsh_host.session.events import SessionHeader
from dsh_host.session.session import Session

# Its logs are built by hand (turnless fixtures), not written by dsh.
pytestmark = pytest.mark.foreign_logs

DAY_MS = 86_400_000


def store_chat(host, session_id: str, cwd: str | None, created_at: float, prompt: str, title: str | None = None):
    # Its events happen five minutes after it was created.
    session = Session(SessionHeader(id=session_id, created_at=created_at, cwd=cwd), clock=lambda: created_at + 300_000)
    content = [{"type": "text", "text": prompt}]
    session.append("user/message", {"content": content, "source": {"kind": "user"}}, surface_op="append")
    if title is not None:
        session.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": "user"}})
    host.store.append(session.header, list(session.events))


@pytest.fixture
def stored(dsh_cli, make_host):
    host = make_host(data_dir=dsh_cli.home)
    store_chat(host, "elsewhere", "/else", 3 * DAY_MS, "the migration bug, seen elsewhere")
    store_chat(host, "here", str(dsh_cli.cwd), 2 * DAY_MS, "we fixed the migration bug", "Fix \x1b[2Jit")
    store_chat(host, "named", None, 1 * DAY_MS, "nothing", "Migration plan")
    host.close()


def test_search_prints_id_age_cwd_title_and_the_snippet(dsh_cli, stored):
    code, out, err = dsh_cli("sessions", "search", "migration")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [line.split("  ")[0] for line in lines if not line.startswith("    ")] == ["here", "named", "elsewhere"]
    assert lines[0].startswith("here  ") and lines[0].endswith(f"  {dsh_cli.cwd}  Fix \\x1b[2Jit")
    assert " ago  " in lines[0]
    assert lines[1] == "    we fixed the migration bug"
    assert lines[2].endswith("  (no cwd)  Migration plan")
    assert lines[4] == "    the migration bug, seen elsewhere"


def test_search_with_cwd_limit_and_json(dsh_cli, stored):
    code, out, _ = dsh_cli("sessions", "search", "MIGRATION", "--cwd", "/else", "--limit", "2", "--json")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "id": "elsewhere",
            "title": None,
            "cwd": "/else",
            "createdAt": 3 * DAY_MS,
            "lastActivityAt": 3 * DAY_MS + 300_000,
            "snippet": "the migration bug, seen elsewhere",
        },
        {
            "id": "named",
            "title": "Migration plan",
            "cwd": None,
            "createdAt": DAY_MS,
            "lastActivityAt": DAY_MS + 300_000,
            "snippet": None,
        },
    ]


@pytest.mark.parametrize("query", ['"unbalanced (', "NEAR(a b) OR *", "\x00\x1b"])
def test_search_syntax_is_plain_text(dsh_cli, stored, query):
    code, out, err = dsh_cli("sessions", "search", query)
    assert (code, out) == (1, "")  # read as words, which no session holds
    assert err == f"dsh: no session matches {json.dumps(query)}\n"


def test_no_match_exits_1_with_one_line_on_stderr_as_grep_does(dsh_cli, stored):
    for argv in (["nothing-like-it"], ["nothing-like-it", "--json"]):
        assert dsh_cli("sessions", "search", *argv) == (1, "", 'dsh: no session matches "nothing-like-it"\n')


def test_search_refuses_a_limit_below_one(dsh_cli, stored):
    code, _, err = dsh_cli("sessions", "search", "x", "--limit", "0")
    assert code != 0 and "--limit" in err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_records_become_a_bar_on_a_terminal_only():
    terminal, pipe, clock = Terminal(), io.StringIO(), Clock()
    report = progress_reporter("indexing")
    with drawing_progress(terminal, clock):
        report(1, 4)  # under a second in: nothing yet
        clock.now += 1.5
        report(2, 4)
        report(4, 4)
    with drawing_progress(pipe, clock):
        report(1, 4)
        clock.now += 5
        report(2, 4)
    report(3, 4)  # drawn by nobody once the block ended
    assert terminal.getvalue() == (
        f"\rdsh: indexing [{'#' * 15}{'.' * 15}] 2/4\x1b[K\rdsh: indexing [{'#' * 30}] 4/4\x1b[K\n"
    )
    assert pipe.getvalue() == ""


def test_work_done_within_a_second_draws_nothing():
    terminal, clock = Terminal(), Clock()
    report = progress_reporter("indexing")
    with drawing_progress(terminal, clock):
        report(1, 4)
        clock.now += 0.5
        report(4, 4)
    assert terminal.getvalue() == ""


def test_a_build_in_bytes_shows_them_with_its_rate_and_the_time_left():
    terminal, clock = Terminal(), Clock()
    with drawing_progress(terminal, clock):
        report_progress("indexing claude-code sessions", 0, 4000, bytes_done=0, bytes_total=5_000_000_000)
        clock.now += 10
        report_progress(
            "indexing claude-code sessions", 1000, 4000, bytes_done=1_000_000_000, bytes_total=5_000_000_000
        )
    assert terminal.getvalue().endswith("] 1000/4000 files, 1.0 GB of 5.0 GB, 100.0 MB/s, 40s left\x1b[K")
