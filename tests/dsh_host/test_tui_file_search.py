"""The `@` token, file mention formatting and the workspace search."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from dsh_host.tui.file_search import (
    AtToken,
    FileSearchCancelled,
    WorkspaceFileSearch,
    active_at_token,
    format_file_mention,
    fuzzy_score,
)

# --- active_at_token --------------------------------------------------------------------------------


def test_plain_token_at_the_cursor():
    assert active_at_token("@src/tu") == AtToken("@src/tu", "src/tu", quoted=False)


def test_quoted_token_may_hold_spaces():
    assert active_at_token('read @"docs/design n') == AtToken('@"docs/design n', "docs/design n", quoted=True)


def test_an_email_address_is_not_a_token():
    assert active_at_token("mail a@b.test") is None


def test_the_token_must_end_at_the_cursor():
    text = 'done @src/x" next'
    assert len(text) == 17
    assert active_at_token(text) is None
    assert active_at_token("@src and more") is None


def test_a_bare_at_sign_is_a_token_with_an_empty_query():
    assert active_at_token("look @") == AtToken("@", "", quoted=False)
    assert active_at_token('@"') == AtToken('@"', "", quoted=True)


def test_the_at_sign_may_follow_any_javascript_whitespace_or_a_line_start():
    assert active_at_token("first line\n@da") == AtToken("@da", "da", quoted=False)
    assert active_at_token("x\u3000@da") == AtToken("@da", "da", quoted=False)
    assert active_at_token("x\ufeff@da") == AtToken("@da", "da", quoted=False)
    # Python counts \x1c as whitespace; JavaScript does not.
    assert active_at_token("x\x1c@da") is None


def test_a_closed_quote_ends_the_quoted_form():
    # `@"a b"` is closed: the quoted pattern needs no `"` after `@"`; the plain one stops at space.
    assert active_at_token('@"a b"') is None
    assert active_at_token('@"ab"') == AtToken('@"ab"', '"ab"', quoted=False)


# --- format_file_mention ----------------------------------------------------------------------------


def test_file_and_directory_mentions():
    assert format_file_mention("src/index.ts", False) == "@src/index.ts"
    assert format_file_mention("src", True) == "@src/"
    assert format_file_mention("src/", True) == "@src/"


def test_names_with_whitespace_are_quoted():
    assert format_file_mention("docs/design notes.md", False) == '@"docs/design notes.md"'
    assert format_file_mention("my docs", True) == '@"my docs/"'


def test_the_quoted_form_is_preserved_on_request():
    assert format_file_mention("README.md", False, quoted=True) == '@"README.md"'


@pytest.mark.parametrize("bad", ["a\nb", 'say "hi".md', "tab\there", "nul\x00", "del\x7f", "csi\x9b", "c1\x85"])
def test_unrepresentable_paths_are_rejected(bad):
    assert format_file_mention(bad, False) is None


# --- the search ---------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    for directory in ("src", "docs", "zeta", ".git/objects", "node_modules/pkg", ".venv/lib", ".github"):
        (tmp_path / directory).mkdir(parents=True)
    for file in (
        "README.md",
        "alpha.txt",
        ".env",
        "src/tspc-helper.ts",
        "src/tui.spec.ts",
        "src/source-file.ts",
        "docs/design notes.md",
        ".git/config",
        "node_modules/pkg/index.js",
        ".github/ci.yml",
    ):
        (tmp_path / file).write_text("x")
    return tmp_path


def paths(matches):
    return [m.path + ("/" if m.is_dir else "") for m in matches]


async def test_an_empty_query_lists_the_root_directories_first(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert paths(await search.search("")) == ["docs/", "src/", "zeta/", "alpha.txt", "README.md"]


async def test_a_directory_query_lists_that_directory(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert paths(await search.search("src/")) == [
        "src/source-file.ts",
        "src/tspc-helper.ts",
        "src/tui.spec.ts",
    ]
    assert paths(await search.search("docs/")) == ["docs/design notes.md"]


async def test_a_name_after_the_slash_filters_the_listing(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert paths(await search.search("src/tu")) == ["src/tui.spec.ts"]
    assert paths(await search.search("src/ts")) == [
        "src/tspc-helper.ts",
        "src/tui.spec.ts",
        "src/source-file.ts",
    ]


async def test_hidden_entries_show_only_when_asked_for_and_excluded_ones_never(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert paths(await search.search("yml")) == []  # hidden paths are not indexed
    assert paths(await search.search(".")) == [".env", ".github/", "alpha.txt", "README.md"]
    assert paths(await search.search(".g")) == [".github/"]  # .git is excluded
    assert paths(await search.search(".github/")) == [".github/ci.yml"]
    assert paths(await search.search("node")) == []


async def test_an_absolute_query_lists_that_directory(workspace):
    search = WorkspaceFileSearch(str(workspace / "src"))
    listed = paths(await search.search(f"{workspace}/"))
    assert f"{workspace}/src/" in listed
    assert f"{workspace}/README.md" in listed


@pytest.mark.parametrize("query", ["~", "~/", "~/x", "../", "..", "src/../", "src/../../etc"])
async def test_queries_leaving_the_workspace_find_nothing(workspace, query):
    assert await WorkspaceFileSearch(str(workspace)).search(query) == []


async def test_a_file_used_as_a_directory_or_a_missing_directory_finds_nothing(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert await search.search("README.md/") == []
    assert await search.search("missing/") == []


async def test_symlinked_directories_are_offered_but_not_traversed(workspace, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret-plans.txt").write_text("x")
    os.symlink(outside, workspace / "linked")
    search = WorkspaceFileSearch(str(workspace))
    assert "linked/" in paths(await search.search(""))
    assert await search.search("secret") == []


async def test_fuzzy_ranking_prefers_contiguous_matches_in_the_name(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert paths(await search.search("tspc")) == ["src/tspc-helper.ts", "src/tui.spec.ts"]
    assert paths(await search.search("sfts")) == ["src/source-file.ts"]
    assert paths(await search.search("do"))[0] == "docs/"


def test_fuzzy_score_tiers():
    assert fuzzy_score("abc", "x/abc.txt", "abc.txt") < fuzzy_score("abc", "x/a-b-c.txt", "a-b-c.txt")
    assert fuzzy_score("xa", "x/abc.txt", "abc.txt") is not None  # a path-only match
    assert fuzzy_score("q", "x/abc.txt", "abc.txt") is None


async def test_the_index_is_capped_breadth_first(workspace):
    search = WorkspaceFileSearch(str(workspace), max_entries=4)
    # The first four indexed entries are the root's, in name order.
    assert paths(await search.search("a")) == ["alpha.txt", "README.md"]
    assert await search.search("tspc") == []


async def test_results_are_capped(workspace):
    search = WorkspaceFileSearch(str(workspace), max_results=2)
    assert len(await search.search("s")) == 2
    assert len(await search.search("")) == 2


async def test_the_index_is_kept_until_invalidated(workspace):
    search = WorkspaceFileSearch(str(workspace))
    assert await search.search("newfile") == []
    (workspace / "newfile.md").write_text("x")
    assert await search.search("newfile") == []
    search.invalidate()
    assert paths(await search.search("newfile")) == ["newfile.md"]


async def test_a_disposed_search_finds_nothing(workspace):
    search = WorkspaceFileSearch(str(workspace))
    search.dispose()
    assert await search.search("") == []
    assert await search.search("alpha") == []


@pytest.mark.parametrize(
    "options", [{"max_entries": 0}, {"max_results": -1}, {"max_entries": True}, {"max_results": 1.5}]
)
def test_limits_are_validated(options, tmp_path):
    with pytest.raises(ValueError, match="must be a positive integer"):
        WorkspaceFileSearch(str(tmp_path), **options)


async def test_a_pre_set_cancel_signal_aborts_at_once(workspace):
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(FileSearchCancelled, match="file search aborted"):
        await WorkspaceFileSearch(str(workspace)).search("", cancel)


async def test_a_search_is_abandoned_when_superseded(workspace, monkeypatch):
    release = threading.Event()
    walking = asyncio.Event()
    loop = asyncio.get_running_loop()
    search = WorkspaceFileSearch(str(workspace))
    real_walk = search._walk

    def slow_walk(stop):
        loop.call_soon_threadsafe(walking.set)
        release.wait()
        return real_walk(stop)

    monkeypatch.setattr(search, "_walk", slow_walk)
    cancel = asyncio.Event()
    pending = asyncio.ensure_future(search.search("alpha", cancel))
    await walking.wait()
    assert not pending.done()  # the walk is held
    cancel.set()
    with pytest.raises(FileSearchCancelled):
        await pending
    # The walk finishes later; its result serves the next caller.
    release.set()
    assert paths(await search.search("alpha")) == ["alpha.txt"]
