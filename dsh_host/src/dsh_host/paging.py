"""The records of the session query service's paged reads (public namespace `dsh_host.paging`).

`SessionQuery.list_page` answers a `SessionPage` of the sessions listing (newest last activity
first, keyset-paged by an opaque cursor), `list_agents` the `AgentInfo` of each agent it can be
filtered to, `read_surface_page` a `SurfacePage` of a session's conversation (`SurfaceEntry` per
message, with the session's header and latest title) and `read_events_page` an `EventsPage` of
its full log; a request none of them can answer is an `InvalidPageRequest`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.errors import DshError
from dsh_host.session.snapshots import EventsPage, SurfaceEntry, SurfacePage

if TYPE_CHECKING:
    from dsh_host.query import SessionRecord


class InvalidPageRequest(DshError, ValueError):
    """A page request that cannot be answered: a malformed cursor, an unknown agent, a limit out of
    range or a negative position. Its message is one line, fit for a client's error."""


@dataclass(frozen=True)
class SessionPage:
    """One page of the sessions listing, newest last activity first (ties by id, code-point order).

    `next` is the cursor to pass as `after` for the next page, None when this page is the last.
    """

    records: tuple[SessionRecord, ...]
    next: str | None


@dataclass(frozen=True)
class AgentInfo:
    """An agent the listing can be filtered to: its `name` (the filter's value) and the name a person reads."""

    name: str
    display_name: str


__all__ = ["AgentInfo", "EventsPage", "InvalidPageRequest", "SessionPage", "SurfaceEntry", "SurfacePage"]
