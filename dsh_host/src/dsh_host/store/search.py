"""What a candidate search query means, whatever store answers it (see `SessionStore.search_candidates`).

A query is user text, never syntax: the name match looks for the whole lower-cased query in a
session's id, cwd and latest title; the body match wants each of its words in one message of
the session's surface. Words are what whitespace, control characters and lone surrogates separate; a
word without a letter or digit cannot match a word of text and is dropped. Stores quote each
word for their full-text engine, so quotes, `*`, `NEAR`, `AND` or parentheses are plain text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from dsh_host.store.base import CandidateRow

# Compaction's checkpoint marker (`dsh_compact.marker.COMPACT_CHECKPOINT_SOURCE`): a checkpoint
# is a `user/message` from this source, and a reference shows it, so the body search finds it.
CHECKPOINT_SOURCE_KIND = "plugin"
CHECKPOINT_SOURCE_PLUGIN = "compact"

_SEPARATORS = re.compile("[\\s\x00-\x1f\x7f-\x9f\ud800-\udfff]+")
_SPACES = re.compile(r"\s+")
SNIPPET_CHARS = 80


def name_needle(query: str) -> str:
    """The text a name match looks for in the lower-cased id, cwd and title."""
    return query.lower()


def name_matches(needle: str, session_id: str, cwd: str | None, title: str | None) -> bool:
    """Whether a session matches `needle` (from `name_needle`) by name: in its id, cwd or latest title."""
    return (
        needle in session_id.lower()
        or (cwd is not None and needle in cwd.lower())
        or (title is not None and needle in title.lower())
    )


def body_words(query: str) -> list[str]:
    """The words every body match must contain, in query order (duplicates dropped)."""
    words: list[str] = []
    for word in _SEPARATORS.split(query):
        if word and word not in words and any(unicodedata.category(ch)[0] in "LN" for ch in word):
            words.append(word)
    return words


def snippet_cutter(words: list[str], width: int = SNIPPET_CHARS) -> Callable[[str], str]:
    """A function cutting a snippet of a text for `words` (see `cut_snippet`), its pattern compiled once."""
    pattern = re.compile("(?<!\\w)(?:" + "|".join(map(re.escape, words)) + ")(?!\\w)", re.IGNORECASE) if words else None
    return lambda text: cut_snippet(text, pattern, width)


def cut_snippet(text: str, pattern: re.Pattern[str] | None, width: int = SNIPPET_CHARS) -> str:
    """About `width` characters of `text` around the first match of `pattern`, whitespace
    collapsed, `…` where it was cut; its start when nothing matches as written (a match the
    full-text engine made by folding diacritics, say)."""
    if len(text) <= width:  # all of it fits (most messages): no window to find, whitespace collapsed
        return " ".join(text.split())
    found = pattern.search(text) if pattern is not None else None
    at = 0 if found is None else found.start()
    # Only a window around the match is flattened: a long message costs no more than a short one.
    lo = max(0, at - 2 * width)
    window = text[lo : at + 2 * width]
    head = _SPACES.sub(" ", window[: at - lo]).lstrip()
    tail = _SPACES.sub(" ", window[at - lo :]).rstrip()
    flat, offset = (head + tail, len(head)) if head else (tail.lstrip(), 0)
    # A third of the width before the match, but never less text than the width allows.
    start = max(0, min(offset - width // 3, len(flat) - width))
    if start:
        space = flat.rfind(" ", 0, start + 1)
        start = space + 1 if space > start - width // 3 else start
    end = min(len(flat), start + width)
    more = end < len(flat) or lo + len(window) < len(text)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start or lo else "") + flat[start:end] + ("…" if more else "")


def searchable_condition(row: str) -> str:
    """SQL (SQLite's and PostgreSQL's) true for a `surface` row whose text a reference shows.

    That is session-reference's projection: assistant text, the user's prompts and steering,
    and compaction checkpoints, never an empty text. `row` qualifies the columns (`new.`, or "").
    """
    return (
        f"{row}text != '' AND ({row}type = 'assistant/message'"
        f" OR ({row}type = 'user/message' AND ({row}source_kind = 'user'"
        f" OR ({row}source_kind = '{CHECKPOINT_SOURCE_KIND}' AND {row}source_plugin = '{CHECKPOINT_SOURCE_PLUGIN}')))"
        f" OR ({row}type = 'steering/message' AND {row}source_kind = 'user'))"
    )


def cwd_group(cwd: str | None, target_cwd: str | None, grouped: bool = True) -> int:
    """The group a candidate ranks in: 0 the target's cwd, 1 no cwd, 2 any other cwd (all 0 when not `grouped`)."""
    if not grouped:
        return 0
    if cwd is None:
        return 1
    return 0 if target_cwd is not None and cwd == target_cwd else 2


def rank_key(
    row: CandidateRow, target_cwd: str | None, grouped: bool = True
) -> tuple[int, bool, float, int | float, str]:
    """The order `search_candidates` returns rows in: group, name before body, relevance, newest, id."""
    return (cwd_group(row.cwd, target_cwd, grouped), row.snippet is not None, row.score, -row.created_at, row.id)


class SearchQuery:
    """A candidate search query's meaning, for a store or source that answers one itself.

    `needle` is what a name match looks for, `words` what a body match needs in one message
    (`SessionStore.search_candidates` says how both match); `snippet(text)` cuts the excerpt a
    body match shows; `rank_key(row, target_cwd, grouped=True)` orders `CandidateRow`s as every
    store does (without `grouped`, the cwd groups do not rank).
    """

    rank_key = staticmethod(rank_key)

    def __init__(self, query: str) -> None:
        self.query = query
        self.needle = name_needle(query)
        self.words = body_words(query)
        self._cut = snippet_cutter(self.words)

    def matches_name(self, session_id: str, cwd: str | None, title: str | None) -> bool:
        """Whether a session matches by id, cwd or title (every session does for an empty query)."""
        return name_matches(self.needle, session_id, cwd, title)

    def snippet(self, text: str) -> str:
        """The excerpt of `text` a body match shows, around the first match."""
        return self._cut(text)
