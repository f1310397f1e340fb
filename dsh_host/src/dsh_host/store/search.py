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
from typing import Any

from dsh_host.store.base import CandidateRow

# Compaction's checkpoint marker (`dsh_compact.marker.COMPACT_CHECKPOINT_SOURCE`): a checkpoint
# is a `user/message` from this source, and a reference shows it, so the body search finds it.
CHECKPOINT_SOURCE_KIND = "plugin"
CHECKPOINT_SOURCE_PLUGIN = "compact"

_SEPARATORS = re.compile("[\\s\x00-\x1f\x7f-\x9f\ud800-\udfff]+")


def name_needle(query: str) -> str:
    """The text a name match looks for in the lower-cased id, cwd and title."""
    return query.lower()


def name_matches(needle: str, session_id: str, cwd: str | None, title: str | None) -> bool:
    """Whether a session matches `needle` (from `name_needle`) by name, as the spec's candidates do."""
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


def cwd_group(cwd: str | None, target_cwd: str | None) -> int:
    """The spec's candidate groups: 0 the target's cwd, 1 no cwd, 2 any other cwd."""
    if cwd is None:
        return 1
    return 0 if target_cwd is not None and cwd == target_cwd else 2


def rank_key(row: CandidateRow, target_cwd: str | None) -> tuple[Any, ...]:
    """The order `search_candidates` returns rows in: group, name before body, relevance, newest, id."""
    return (cwd_group(row.cwd, target_cwd), row.snippet is not None, row.score, -row.created_at, row.id)
