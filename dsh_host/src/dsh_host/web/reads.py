"""The paged reads the pages make, in the shape of session query's paged API.

Session query is gaining keyset-paged listing by last activity and paged surface and log reads
(`SessionQuery.list_page`, `read_surface_page`, `read_events_page`, with the records named
here). Until it has them, these functions answer the same calls over its whole-session reads,
so the pages and their tests already speak the paged API; once it has them, each function here
is one call to its namesake.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.errors import DshError
from dsh_host.store.search import CHECKPOINT_SOURCE_KIND, CHECKPOINT_SOURCE_PLUGIN

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue
    from dsh_host.query import SessionQuery, SessionRecord
    from dsh_host.sources.registry import SessionSources

MAX_LIMIT = 1000
DSH_AGENT = "dsh"
"""The `agent` filter value of dsh's own sessions."""


class InvalidPageRequest(DshError, ValueError):
    """A page request that cannot be answered (malformed cursor, unknown agent, bad limit)."""


@dataclass(frozen=True)
class SessionPage:
    """One page of the listing, newest activity first; `next` is the cursor of the next, None on the last."""

    records: tuple[SessionRecord, ...]
    next: str | None


@dataclass(frozen=True)
class AgentInfo:
    """An agent the listing can be filtered to: its filter value and the name a person reads."""

    name: str
    display_name: str


@dataclass(frozen=True)
class SurfaceEntry:
    """One message of a session's current surface as a person reads it (`text` raw)."""

    position: int
    seq: int
    time: int | float | None
    kind: str
    text: str
    source_kind: str | None
    source_plugin: str | None


@dataclass(frozen=True)
class SurfacePage:
    """Surface entries in reading order; `before` asks for the next older page (None: none older)."""

    session_id: str
    entries: tuple[SurfaceEntry, ...]
    before: int | None
    captured_through_seq: int | None


@dataclass(frozen=True)
class EventsPage:
    """Log events in seq order; `before_seq` asks for the next older page (None: none older)."""

    session_id: str
    events: tuple[dict[str, JsonValue], ...]
    before_seq: int | None
    captured_through_seq: int | None


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidPageRequest(f"limit must be from 1 to {MAX_LIMIT}, not {limit}")


def _activity(record: SessionRecord) -> int | float:
    return record.created_at if record.last_activity_at is None else record.last_activity_at


def _key(record: SessionRecord) -> tuple[int | float, str]:
    return (-_activity(record), record.id)


def _cursor(record: SessionRecord) -> str:
    key = json.dumps([_activity(record), record.id], ensure_ascii=True)
    return base64.urlsafe_b64encode(key.encode("ascii")).decode("ascii")


def _uncursor(cursor: str) -> tuple[int | float, str]:
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise InvalidPageRequest(f"invalid cursor {json.dumps(cursor)}") from None
    if not (isinstance(key, list) and len(key) == 2 and type(key[0]) in (int, float) and isinstance(key[1], str)):
        raise InvalidPageRequest(f"invalid cursor {json.dumps(cursor)}")
    return (-key[0], key[1])


def list_agents(sources: SessionSources) -> list[AgentInfo]:
    """dsh first, then each mounted source, under the name its agent is known by."""
    return [AgentInfo(DSH_AGENT, DSH_AGENT), *(AgentInfo(n, sources.display_name(n)) for n in sources.names)]


async def list_page(
    query: SessionQuery,
    *,
    agent: str | None = None,
    cwd: str | None = None,
    after: str | None = None,
    limit: int = 50,
    agents: frozenset[str] | None = None,
) -> SessionPage:
    """Sessions newest activity first (ties by id), of one agent (`dsh`, a source's name) and cwd."""
    _check_limit(limit)
    if agent is not None and agents is not None and agent not in agents:
        raise InvalidPageRequest(f"unknown agent {json.dumps(agent)}")
    start = None if after is None else _uncursor(after)
    records = sorted(
        (
            r
            for r in await query.list_sessions()
            if (agent is None or (r.source or DSH_AGENT) == agent) and (cwd is None or r.cwd == cwd)
        ),
        key=_key,
    )
    if start is not None:
        records = [r for r in records if _key(r) > start]
    shown = tuple(records[:limit])
    return SessionPage(shown, _cursor(shown[-1]) if len(records) > limit else None)


async def list_cwds(query: SessionQuery, *, agent: str | None = None) -> list[str]:
    """The distinct cwds of the sessions (of one agent), sorted."""
    records = await query.list_sessions()
    return sorted({r.cwd for r in records if r.cwd is not None and (agent is None or (r.source or DSH_AGENT) == agent)})


def _entry(position: int, event: dict[str, JsonValue]) -> SurfaceEntry | None:
    from dsh_host.session.events import surface_text

    kind = event.get("type")
    if kind not in ("user/message", "assistant/message", "steering/message"):
        return None
    text = surface_text(str(kind), event.get("data"))
    if not text.text:
        return None
    if kind == "steering/message":
        shown = "steering"
    elif kind == "assistant/message":
        shown = "assistant"
    elif text.source_kind == CHECKPOINT_SOURCE_KIND and text.source_plugin == CHECKPOINT_SOURCE_PLUGIN:
        shown = "checkpoint"
    else:
        shown = "user"
    seq, time = event.get("seq"), event.get("time")
    assert isinstance(seq, int)
    return SurfaceEntry(
        position,
        seq,
        time if isinstance(time, (int, float)) else None,
        shown,
        text.text,
        None if shown == "assistant" else text.source_kind,
        None if shown == "assistant" else text.source_plugin,
    )


async def read_surface_page(
    query: SessionQuery, session_id: str, *, before: int | None = None, limit: int = 50
) -> SurfacePage:
    """The newest `limit` entries of the surface before position `before` (None: the newest)."""
    _check_limit(limit)
    if before is not None and before < 0:
        raise InvalidPageRequest(f"before must not be negative, not {before}")
    snapshot = await query.read_surface(session_id)
    entries = [e for i, event in enumerate(snapshot.events) if (e := _entry(i, event)) is not None]
    if before is not None:
        entries = [e for e in entries if e.position < before]
    shown = entries[-limit:]
    older = shown[0].position if len(entries) > limit else None
    return SurfacePage(session_id, tuple(shown), older, snapshot.captured_through_seq)


async def read_events_page(
    query: SessionQuery, session_id: str, *, before_seq: int | None = None, limit: int = 200
) -> EventsPage:
    """The newest `limit` events of the log with seq below `before_seq` (None: the newest)."""
    _check_limit(limit)
    if before_seq is not None and before_seq < 0:
        raise InvalidPageRequest(f"before_seq must not be negative, not {before_seq}")
    events = await query.read_events(session_id)
    last = events[-1]["seq"] if events else None
    if before_seq is not None:
        events = [e for e in events if isinstance(e["seq"], int) and e["seq"] < before_seq]
    shown = events[-limit:]
    older = shown[0]["seq"] if len(events) > limit else None
    return EventsPage(
        session_id,
        tuple(shown),
        older if isinstance(older, int) else None,
        last if isinstance(last, int) else None,
    )


async def all_entries(query: SessionQuery, session_id: str) -> list[SurfaceEntry]:
    """Every entry of a session's surface, read page by page (the static export holds them all)."""
    pages: list[tuple[SurfaceEntry, ...]] = []
    before = None
    while True:
        got = await read_surface_page(query, session_id, before=before, limit=MAX_LIMIT)
        pages.append(got.entries)
        if got.before is None:
            return [entry for entries in reversed(pages) for entry in entries]
        before = got.before
