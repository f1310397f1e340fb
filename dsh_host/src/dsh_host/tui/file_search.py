"""The `@` token under the cursor, file mentions, and the workspace file search behind them.

`@src/app.py` in a message names a file for the model to read; names with spaces use the quoted
form `@"docs/design notes.md"`. The search lists the directory a query points into, or ranks
every indexed workspace path against a fuzzy query. It never follows symlinked directories and
never leaves the workspace through `..` or `~` (an absolute query lists exactly what it names).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from dsh_host.asyncs import abandon_on, ignore_outcome
from dsh_host.text import JS_WHITESPACE

T = TypeVar("T")

_WS = re.escape(JS_WHITESPACE)
# The quoted form is tried first: `@"docs/design n` is one token although it holds a space.
# `@` counts only at the start of the text or after whitespace, so `a@b.test` is not a token.
_QUOTED_TOKEN = re.compile(rf'(?:(?<=[{_WS}])|^)@"([^"]*)\Z')
_PLAIN_TOKEN = re.compile(rf"(?:(?<=[{_WS}])|^)@([^{_WS}]*)\Z")
_UNREPRESENTABLE = re.compile(r'[\x00-\x1f\x7f-\x9f"]')
_NEEDS_QUOTES = re.compile(rf"[{_WS}]")

EXCLUDED_NAMES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
"""Directories never listed or indexed: tool caches and dependency trees nobody mentions."""

DEFAULT_MAX_ENTRIES = 20_000
DEFAULT_MAX_RESULTS = 50


@dataclass(frozen=True)
class AtToken:
    """The `@` token ending at the cursor: `prefix` is its whole text, `query` what follows `@`."""

    prefix: str
    query: str
    quoted: bool


def active_at_token(text_before_cursor: str) -> AtToken | None:
    """The `@` token that ends exactly at the cursor, if any."""
    match = _QUOTED_TOKEN.search(text_before_cursor)
    if match:
        return AtToken(match.group(0), match.group(1), quoted=True)
    match = _PLAIN_TOKEN.search(text_before_cursor)
    if match:
        return AtToken(match.group(0), match.group(1), quoted=False)
    return None


def format_file_mention(path: str, is_dir: bool, *, quoted: bool = False) -> str | None:
    """`@path` (directories get a trailing `/`), quoted when it holds whitespace or `quoted`.

    Returns None for a path no mention can carry: one containing `"` or a control character.
    """
    if _UNREPRESENTABLE.search(path):
        return None
    if is_dir and not path.endswith("/"):
        path += "/"
    if quoted or _NEEDS_QUOTES.search(path):
        return f'@"{path}"'
    return f"@{path}"


class FileSearchCancelled(Exception):
    """The caller's cancel signal was set before its search finished."""

    def __init__(self) -> None:
        super().__init__("file search aborted")


@dataclass(frozen=True)
class FileMatch:
    """A file or directory to offer: `path` is what the mention carries (no trailing `/`)."""

    path: str
    name: str
    is_dir: bool


class WorkspaceFileSearch:
    """Finds files under `root` for `@` completion.

    The index of workspace paths is built on first use in a worker thread, breadth first so
    the `max_entries` cap keeps the shallow paths, and kept until `invalidate()`.
    """

    def __init__(
        self, root: str, *, max_entries: int = DEFAULT_MAX_ENTRIES, max_results: int = DEFAULT_MAX_RESULTS
    ) -> None:
        for name, value in (("max_entries", max_entries), ("max_results", max_results)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"file search {name} must be a positive integer, got {value!r}")
        self.root = os.path.abspath(root)
        self.max_entries = max_entries
        self.max_results = max_results
        self._index: asyncio.Future[list[FileMatch]] | None = None
        self._stop_walk: threading.Event | None = None
        self._disposed = False

    def invalidate(self) -> None:
        """Forget the index (the next search rebuilds it) and stop a walk still running."""
        if self._stop_walk is not None:
            self._stop_walk.set()
        self._index = None
        self._stop_walk = None

    def dispose(self) -> None:
        """Stop for good: later searches find nothing."""
        self.invalidate()
        self._disposed = True

    async def search(self, query: str, cancel: asyncio.Event | None = None) -> list[FileMatch]:
        """Files and directories matching `query`, best first, at most `max_results`."""
        if cancel is not None and cancel.is_set():
            raise FileSearchCancelled
        if self._disposed or _escapes_workspace(query):
            return []
        # Hidden names are not indexed, so a query starting with "." lists the root instead.
        if "/" in query or not query or query.startswith("."):
            directory, _, name_query = query.rpartition("/")
            if query.startswith("/"):
                directory = directory or "/"
            return await abandon_on(
                cancel, asyncio.to_thread(self._list_directory, directory, name_query), FileSearchCancelled
            )
        entries = await abandon_on(cancel, self._ensure_index(), FileSearchCancelled)
        return _rank(entries, query, lambda m: m.path)[: self.max_results]

    def _ensure_index(self) -> asyncio.Future[list[FileMatch]]:
        if self._index is None:
            self._stop_walk = threading.Event()
            self._index = asyncio.ensure_future(asyncio.to_thread(self._walk, self._stop_walk))
            ignore_outcome(self._index)
        return self._index

    def _list_directory(self, directory: str, name_query: str) -> list[FileMatch]:
        absolute = os.path.join(self.root, directory)
        show_hidden = name_query.startswith(".")
        matches = []
        try:
            with os.scandir(absolute) as entries:
                for entry in entries:
                    if entry.name in EXCLUDED_NAMES or (entry.name.startswith(".") and not show_hidden):
                        continue
                    path = f"{directory.rstrip('/')}/{entry.name}" if directory else entry.name
                    matches.append(FileMatch(path, entry.name, _is_dir(entry)))
        except OSError:  # missing, unreadable, or a file used as a directory: nothing to list
            return []
        if not name_query:
            matches.sort(key=lambda m: (not m.is_dir, m.name.casefold(), m.name))
            return matches[: self.max_results]
        return _rank(matches, name_query, lambda m: m.name)[: self.max_results]

    def _walk(self, stop: threading.Event) -> list[FileMatch]:
        found: list[FileMatch] = []
        pending = deque([""])
        while pending and not stop.is_set():
            directory = pending.popleft()
            try:
                with os.scandir(os.path.join(self.root, directory)) as scan:
                    entries = sorted(scan, key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.name in EXCLUDED_NAMES:
                    continue
                path = f"{directory}/{entry.name}" if directory else entry.name
                is_dir = _is_dir(entry)
                found.append(FileMatch(path, entry.name, is_dir))
                if len(found) >= self.max_entries:
                    return found
                if is_dir and not entry.is_symlink():
                    pending.append(path)
        return found


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _escapes_workspace(query: str) -> bool:
    segments = query.split("/")
    return segments[0].startswith("~") or ".." in segments


def _rank(matches: list[FileMatch], query: str, text_of: Callable[[FileMatch], str]) -> list[FileMatch]:
    scored = []
    for match in matches:
        score = fuzzy_score(query, text_of(match), match.name)
        if score is not None:
            scored.append((score, not match.is_dir, match.path, match))
    scored.sort(key=lambda item: item[:3])
    return [item[3] for item in scored]


def fuzzy_score(query: str, path: str, name: str) -> tuple[int, int, int, int] | None:
    """A sort key for `path` against `query` (lower is better), or None when it does not match.

    Tiers, best first: the query is a substring of the name, a subsequence of the name, a
    substring of the path, a subsequence of the path. Within a tier fewer gaps, an earlier
    start and a shorter path win. Matching ignores case.
    """
    needle = query.casefold()
    for tier, haystack in enumerate((name.casefold(), path.casefold())):
        start = haystack.find(needle)
        if start >= 0:
            return (tier * 2, 0, start, len(path))
        positions = _subsequence(needle, haystack)
        if positions is not None:
            gaps = sum(1 for a, b in itertools.pairwise(positions) if b != a + 1)
            return (tier * 2 + 1, gaps, positions[0], len(path))
    return None


def _subsequence(needle: str, haystack: str) -> list[int] | None:
    positions = []
    at = 0
    for char in needle:
        at = haystack.find(char, at)
        if at < 0:
            return None
        positions.append(at)
        at += 1
    return positions
