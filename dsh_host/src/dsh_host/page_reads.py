"""What the session query service's paged reads share (their records are `dsh_host.paging`'s).

`SessionQuery.list_page` lists sessions newest last activity first, keyset-paged across the store
and the sources; `read_surface_page` and `read_events_page` page a session backward. Here: the
opaque cursor of the listing, the checks of a request, the order by activity, and the pages of a
source (or live session) that answers no page itself, cut from what it does answer.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dsh_host.paging import InvalidPageRequest
from dsh_host.session.snapshots import EventsPage, SurfacePage
from dsh_host.store.pages import NodeRow, event_span, events_page, surface_page

if TYPE_CHECKING:
    from dsh_host.query import SessionRecord
    from dsh_host.session.events import SessionHeader, SurfaceText
    from dsh_host.store.base import ActivityKey, SessionRow

MAX_LIMIT = 1000
"""The most rows or entries one page may ask for."""
STORE_AGENT = "dsh"
"""The `agent` filter value that selects the store's own sessions."""


def check_limit(limit: int) -> None:
    """Refuse a page size that is not 1 to `MAX_LIMIT`."""
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise InvalidPageRequest(f"page limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")


def check_position(name: str, value: int | None) -> None:
    """Refuse a `before` position or seq that is not None or a non-negative integer."""
    if value is not None and (type(value) is not int or value < 0):
        raise InvalidPageRequest(f"{name} must be a non-negative integer, not {value!r}")


def activity(row: SessionRow | SessionRecord) -> int | float:
    """When a session was last active: its `last_activity_at`, its `created_at` where that is unknown."""
    return row.created_at if row.last_activity_at is None else row.last_activity_at


def activity_order(row: SessionRow | SessionRecord) -> tuple[int | float, str]:
    """The sort key of the listing by activity: newest first, ties by id."""
    return -activity(row), row.id


def is_after(row: SessionRow | SessionRecord, key: ActivityKey | None) -> bool:
    """Whether `row` comes after `key` in the listing by activity (everything does after None)."""
    return key is None or activity_order(row) > (-key[0], key[1])


def encode_cursor(key: ActivityKey) -> str:
    """The opaque cursor of a listing key (URL-safe text)."""
    text = json.dumps([key[0], key[1]], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> ActivityKey:
    """The listing key of a cursor `encode_cursor` made; `InvalidPageRequest` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, session_id = json.loads(raw.decode("ascii"))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidPageRequest(f"invalid page cursor {cursor!r}") from None
    if type(at) not in (int, float) or not isinstance(session_id, str) or at != at:
        raise InvalidPageRequest(f"invalid page cursor {cursor!r}")
    return at, session_id


def rows_by_activity(
    rows: Sequence[SessionRow], limit: int, after: ActivityKey | None, cwd: str | None
) -> list[SessionRow]:
    """A page of the listing by activity cut from a whole listing (for a source that pages none)."""
    kept = [row for row in rows if (cwd is None or row.cwd == cwd) and is_after(row, after)]
    kept.sort(key=activity_order)
    return kept[:limit]


def surface_page_of(
    header: SessionHeader,
    title: str | None,
    captured_through_seq: int | None,
    count: int,
    node: Callable[[int], tuple[int, int | float | None, SurfaceText]],
    before: int | None,
    limit: int,
) -> SurfacePage:
    """A surface page of `count` nodes, `node(position)` giving each one's (seq, time, text); positions are indexes.

    Only the nodes from `before` back to the page's oldest entry are looked at.
    """

    def fetch(at: int | None, wanted: int) -> list[NodeRow]:
        stop = count if at is None else min(at, count)
        return [(position, *node(position)) for position in range(stop - 1, max(stop - wanted, 0) - 1, -1)]

    return surface_page(header, title, captured_through_seq, fetch, before, limit)


def events_page_of(
    session_id: str, count: int, line: Callable[[int], str], before_seq: int | None, limit: int
) -> EventsPage:
    """A log page of a log of `count` events, `line(seq)` giving each one's log line; only the page's are asked for."""
    first, stop = event_span(before_seq, limit, count)
    return events_page(session_id, first, [line(seq) for seq in range(first, stop)], count)
