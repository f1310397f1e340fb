"""Reads the pages make beyond one call of session query's paged API."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host.paging import SurfaceEntry
    from dsh_host.query import SessionQuery

PAGE_LIMIT = 1000
"""The largest page session query reads at once."""


async def all_entries(query: SessionQuery, session_id: str) -> list[SurfaceEntry]:
    """Every entry of a session's surface, read page by page (the static export holds them all)."""
    pages: list[tuple[SurfaceEntry, ...]] = []
    before = None
    while True:
        got = await query.read_surface_page(session_id, before=before, limit=PAGE_LIMIT)
        pages.append(got.entries)
        if got.before is None:
            return [entry for entries in reversed(pages) for entry in entries]
        before = got.before
