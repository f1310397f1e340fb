"""What both stores do alike to answer a page of a surface or of a log: gather entries, bound seqs.

A store supplies its rows (newest first); nothing here knows SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from dsh_host.session.events import SessionHeader, SurfaceText
from dsh_host.session.snapshots import READABLE_TYPES, EventsPage, SurfaceEntry, SurfacePage, surface_entry

READABLE_SQL = "(" + ", ".join(f"'{kind}'" for kind in sorted(READABLE_TYPES)) + ")"
"""`READABLE_TYPES` as an SQL list, for a store's query to leave the other nodes unread."""

NodeRow = tuple[int, int, "int | float | None", SurfaceText]
"""A surface node as a store reads it for a page: position, seq, time, text."""

FetchNodes = Callable[["int | None", int], Sequence[NodeRow]]
"""`fetch(before, count)`: at most `count` surface nodes before position `before` (None: the last), newest first."""


def surface_page(
    header: SessionHeader,
    title: str | None,
    captured_through_seq: int | None,
    fetch: FetchNodes,
    before: int | None,
    limit: int,
) -> SurfacePage:
    """The page of the newest `limit` readable entries before `before`, fetching nodes until it is full.

    `header` and `title` (the latest title's text) are the session's, read with the nodes.

    A store's query already leaves most unreadable nodes out; the rest (rows whose text only the
    store's raw encoding holds) are sorted out here, and more are fetched in their stead.
    """
    newest_first: list[SurfaceEntry] = []
    at = before
    while len(newest_first) <= limit:
        wanted = limit + 1 - len(newest_first)
        nodes = fetch(at, wanted)
        for position, seq, time, text in nodes:
            entry = surface_entry(position, seq, time, text)
            if entry is not None:
                newest_first.append(entry)
        if len(nodes) < wanted:
            break
        at = nodes[-1][0]
    more = len(newest_first) > limit
    entries = tuple(reversed(newest_first[:limit]))
    before_next = entries[0].position if more else None
    return SurfacePage(header.id, entries, before_next, captured_through_seq, header, title)


def event_span(before_seq: int | None, limit: int, next_seq: int) -> tuple[int, int]:
    """The seqs [first, stop) of the page of at most `limit` events before `before_seq` in a log of `next_seq`."""
    stop = next_seq if before_seq is None else min(before_seq, next_seq)
    return max(0, stop - limit), stop


def events_page(session_id: str, first: int, lines: Sequence[str], next_seq: int) -> EventsPage:
    """The page of a log's events from seq `first`, given their lines."""
    events = tuple(json.loads(line) for line in lines)
    return EventsPage(session_id, events, first if first > 0 else None, next_seq - 1 if next_seq > 0 else None)
