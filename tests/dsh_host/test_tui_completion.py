"""The `@` completer: files, sessions, commands, abandonment, pending answers asked again.

Sessions come from session-reference's own completion source, as its plugin registers it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prompt_toolkit.completion import CompleteEvent, Completion
from prompt_toolkit.document import Document

from dsh_host.text import iso_utc
from dsh_host.tui.completion import MentionCompleter, first_choice
from dsh_host.tui.file_search import WorkspaceFileSearch
from dsh_host.tui.mentions import RegisteredSource
from dsh_host.ui import MentionCompletion
from dsh_session_reference import format_mention, parse_text
from dsh_session_reference.terminal import SessionCompletions


@dataclass(frozen=True)
class Candidate:
    session_id: str
    label: str
    cwd: str | None
    created_at: float


class Candidates:
    """A session-reference service offering fixed candidates (or misbehaving on request)."""

    def __init__(self, *candidates: Candidate) -> None:
        self.candidates = list(candidates)
        self.calls: list[tuple[Any, str, Any, asyncio.Event]] = []
        self.called = asyncio.Event()
        self.hang_until_cancelled = False
        self.fail: Exception | None = None

    async def list_candidates(self, target, query="", limit=None, cancel=None):
        self.calls.append((target, query, limit, cancel))
        self.called.set()
        if self.hang_until_cancelled:
            await cancel.wait()
            raise RuntimeError("superseded")
        if self.fail is not None:
            raise self.fail
        return [c for c in self.candidates if query.lower() in c.session_id.lower()]


TARGET = object()
COMMANDS = [("help", "List the commands"), ("new", "Start a new session")]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "src" / "source-file.ts").write_text("x")
    (tmp_path / "docs" / "design notes.md").write_text("x")
    (tmp_path / "bad\nname.txt").write_text("x")
    return tmp_path


def make(workspace: Path, service: Any = None) -> MentionCompleter:
    sources = [RegisteredSource(SessionCompletions(service))] if service is not None else []
    return MentionCompleter(
        WorkspaceFileSearch(str(workspace)), commands=lambda: COMMANDS, sources=sources, target=lambda: TARGET
    )


async def complete(completer: MentionCompleter, text: str):
    return [c async for c in completer.get_completions_async(Document(text), CompleteEvent(text_inserted=True))]


def table(completions) -> list[tuple[str, str, str]]:
    return [(c.text, c.display_text, c.display_meta_text) for c in completions]


async def test_files_and_folders(workspace):
    completer = make(workspace)
    assert table(await complete(completer, "read @sfts")) == [
        ("@src/source-file.ts ", "File · source-file.ts", "src/source-file.ts")
    ]
    docs = await complete(completer, "@do")
    assert table(docs)[0] == ("@docs/", "Folder · docs/", "docs/")
    assert docs[0].start_position == -3


async def test_a_folder_descends_and_names_with_spaces_are_quoted(workspace):
    completer = make(workspace)
    assert table(await complete(completer, "@docs/")) == [
        ('@"docs/design notes.md" ', "File · design notes.md", "docs/design notes.md")
    ]


async def test_the_quoted_form_is_kept_and_open_for_directories(workspace):
    completer = make(workspace)
    assert (await complete(completer, '@"do'))[0].text == '@"docs/'
    assert [c.text for c in await complete(completer, '@"docs/des')] == ['@"docs/design notes.md" ']


async def test_a_file_named_with_a_line_feed_is_never_offered(workspace):
    completer = make(workspace)
    assert all("bad" not in c.text for c in await complete(completer, "@"))
    assert await complete(completer, "@badname") == []


async def test_sessions_follow_files(workspace):
    service = Candidates(
        Candidate("source-session", "Source chat", str(workspace), 1),
        Candidate("no-cwd", "no-cwd", None, 2),
    )
    completer = make(workspace, service)
    result = table(await complete(completer, "@no-cwd"))
    assert result == [
        (format_mention("no-cwd", "no-cwd") + " ", "Session · no-cwd", "(no cwd) · 1970-01-01T00:00:00.002Z")
    ]
    result = table(await complete(completer, "@source-session"))
    assert result == [
        (
            format_mention("source-session", "Source chat") + " ",
            "Session · Source chat",
            f"source-session · {workspace} · 1970-01-01T00:00:00.001Z",
        )
    ]
    target, query, limit, cancel = service.calls[-1]
    assert (target, query, limit) == (TARGET, "source-session", None)
    assert isinstance(cancel, asyncio.Event)


async def test_file_items_come_before_session_items(workspace):
    service = Candidates(Candidate("src-notes", "src-notes", "/x", 0))
    labels = [c.display_text for c in await complete(make(workspace, service), "@src")]
    assert labels[0] == "Folder · src/"
    assert labels[-1] == "Session · src-notes"


async def test_session_labels_and_fields_are_escaped_but_the_mention_keeps_the_raw_id(workspace):
    unsafe_id = "evil\x1b\x07\x9b\ns"
    service = Candidates(Candidate(unsafe_id, unsafe_id, "/x/\x1b\x07\x9b\nf", 0))
    [item] = await complete(make(workspace, service), "@evil")
    assert item.display_text == r"Session · evil\x1b\x07\x9b\x0as"
    assert item.display_meta_text == r"/x/\x1b\x07\x9b\x0af · 1970-01-01T00:00:00.000Z"
    parsed = parse_text(item.text.strip())
    assert parsed.text == r"@evil\x1b\x07\x9b\x0as"
    assert [(r.session_id, r.label) for r in parsed.references] == [(unsafe_id, r"evil\x1b\x07\x9b\x0as")]


async def test_a_quoted_token_offers_no_sessions(workspace):
    service = Candidates(Candidate("source", "source", None, 0))
    labels = [c.display_text for c in await complete(make(workspace, service), '@"sour')]
    assert labels == ["File · source-file.ts"]
    assert service.calls == []


async def test_failing_candidates_offer_no_sessions(workspace):
    service = Candidates(Candidate("failed", "failed", None, 0))
    service.fail = RuntimeError("store down")
    assert await complete(make(workspace, service), "@failed") == []


async def test_an_unrepresentable_creation_time_offers_no_sessions(workspace):
    service = Candidates(Candidate("far-future", "far-future", None, 9e15))
    assert await complete(make(workspace, service), "@far-future") == []


async def test_a_failing_file_search_still_offers_sessions(workspace, monkeypatch):
    service = Candidates(Candidate("source", "source", None, 0))
    completer = make(workspace, service)

    async def broken(query, cancel=None):
        raise OSError("disk on fire")

    monkeypatch.setattr(completer.files, "search", broken)
    assert [c.display_text for c in await complete(completer, "@sour")] == ["Session · source"]


async def test_a_superseded_request_is_abandoned_and_yields_nothing(workspace):
    service = Candidates(Candidate("slow", "slow", None, 0))
    service.hang_until_cancelled = True
    completer = make(workspace, service)
    pending = asyncio.ensure_future(complete(completer, "@slow"))
    await service.called.wait()
    cancel = service.calls[0][3]
    completer.supersede()
    assert cancel.is_set()
    assert await pending == []


async def test_a_newer_request_cancels_the_older_one(workspace):
    service = Candidates(Candidate("base-slow", "base-slow", None, 0))
    service.hang_until_cancelled = True
    completer = make(workspace, service)
    first = asyncio.ensure_future(complete(completer, "@base-slow"))
    await service.called.wait()
    service.hang_until_cancelled = False
    second = await complete(completer, "@base-slowx")
    assert service.calls[0][3].is_set()
    assert await first == []
    assert second == []


async def test_commands_complete_at_the_start_only(workspace):
    completer = make(workspace)
    assert table(await complete(completer, "/he")) == [("/help ", "/help", "List the commands")]
    assert [c.text for c in await complete(completer, "/")] == ["/help ", "/new "]
    assert await complete(completer, "/help me") == []
    assert await complete(completer, "plain") == []
    assert table(completer.get_completions(Document("/n"), CompleteEvent())) == [
        ("/new ", "/new", "Start a new session")
    ]


async def test_no_token_invalidates_the_file_index(workspace):
    completer = make(workspace)
    assert await complete(completer, "@later") == []
    (workspace / "later.md").write_text("x")
    assert await complete(completer, "@later") == []  # the index is cached
    assert await complete(completer, "moved on ") == []
    assert [c.text for c in await complete(completer, "@later")] == ["@later.md "]


@pytest.mark.parametrize(
    ("ms", "iso"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (1.9, "1970-01-01T00:00:00.001Z"),
        (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
    ],
)
def test_iso_utc_matches_javascript(ms, iso):
    assert iso_utc(ms) == iso


@given(st.floats(min_value=-62_135_596_800_000, max_value=253_402_300_799_999) | st.integers(-(2**40), 2**45))
def test_iso_utc_is_the_utc_calendar_time_truncated_to_the_millisecond(ms):
    moment = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=int(ms))
    assert iso_utc(ms) == moment.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


class Growing:
    """A completion source whose answer the test changes: a status line while `pending`, then items."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.status: str | None = None

    async def __call__(self, agent, token, signal) -> list[MentionCompletion]:
        items = [MentionCompletion(f"@{name} ", f"Item · {name}") for name in self.items]
        if self.status is not None:
            items.append(MentionCompletion(token.prefix, self.status, pending=True))
        return items


def growing(workspace: Path, on_pending) -> tuple[MentionCompleter, Growing]:
    source = Growing()
    completer = MentionCompleter(
        WorkspaceFileSearch(str(workspace)),
        commands=lambda: COMMANDS,
        sources=[RegisteredSource(source)],
        target=lambda: TARGET,
        on_pending=on_pending,
    )
    return completer, source


async def test_a_pending_item_leads_and_the_completer_asks_again_by_itself(workspace):
    asked = asyncio.Event()
    completer, source = growing(workspace, asked.set)
    source.items, source.status = ["source-a"], "indexing, 1 of 3"
    shown = [c.display_text for c in await complete(completer, "@sour")]
    assert shown == ["indexing, 1 of 3", "File · source-file.ts", "Item · source-a"]
    await asyncio.wait_for(asked.wait(), 10)  # REFRESH_SECONDS later, with no new request

    source.items, source.status = ["source-a", "source-b"], None
    answer = await completer.ask_again()
    assert answer is not None
    document, completions = answer
    assert document.text == "@sour"
    assert [c.display_text for c in completions] == ["File · source-file.ts", "Item · source-a", "Item · source-b"]
    assert await completer.ask_again() is None  # nothing pending any more: the refreshes stop


async def test_typing_on_drops_a_pending_answer(workspace):
    completer, source = growing(workspace, lambda: None)
    source.status = "indexing, 0 of 3"
    assert [c.display_text for c in await complete(completer, "@x")] == ["indexing, 0 of 3"]
    completer.supersede()  # what every edit (and Escape) does
    assert await completer.ask_again() is None


async def test_an_answer_is_announced_once_taken_and_an_abandoned_one_is_not(workspace):
    answered: list[str] = []
    service = Candidates(Candidate("slow", "slow", None, 0))
    completer = MentionCompleter(
        WorkspaceFileSearch(str(workspace)),
        commands=lambda: COMMANDS,
        sources=[RegisteredSource(SessionCompletions(service))],
        target=lambda: TARGET,
        on_answered=lambda document: answered.append(document.text),
    )
    assert [c.display_text for c in await complete(completer, "@slow")] == ["Session · slow"]
    assert answered == []  # scheduled: the editor makes its menu of the answer first
    await asyncio.sleep(0)
    assert answered == ["@slow"]

    service.hang_until_cancelled = True
    service.called.clear()
    pending = asyncio.ensure_future(complete(completer, "@slowx"))
    await service.called.wait()
    completer.supersede()
    assert await pending == []
    await asyncio.sleep(0)
    assert answered == ["@slow"]


def test_the_first_choice_passes_over_rows_that_put_back_the_token():
    document = Document("see @wal")
    status = Completion("@wal", start_position=-4, display="indexing, 1 of 3")
    row = Completion("@walrus ", start_position=-4)
    assert first_choice(document, [status, row]) is row
    assert first_choice(document, [status]) is None
    assert first_choice(document, []) is None
