"""Reads the pages make beyond one call of session query's paged API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host.page_reads import MAX_LIMIT

if TYPE_CHECKING:
    from dsh_host.paging import SurfaceEntry, SurfacePage
    from dsh_host.query import SessionQuery


async def all_entries(query: SessionQuery, session_id: str) -> tuple[SurfacePage, list[SurfaceEntry]]:
    """The newest page of a session's surface (its header and title are the session's) and every
    entry of the surface, read page by page, each as large as session query allows (the static
    export holds them all)."""
    pages: list[SurfacePage] = []
    before = None
    while True:
        got = await query.read_surface_page(session_id, before=before, limit=MAX_LIMIT)
        pages.append(got)
        if got.before is None:
            return pages[0], [entry for page in reversed(pages) for entry in page.entries]
        before = got.before
