"""Paged reads: a page costs what it holds, not what the session or the listing holds.

Each figure is measured against a baseline taken in the same run on the same data:

- `surface_page_200k`: the query service's `read_surface_page` of the newest 200 entries of a
  persisted session of 200,000 events (2,000 on the surface) against its `read_surface` of the
  whole surface, which a view showing one page read before (a ratio well below 1 is the point).
- `surface_page_deep_vs_newest`: a page 1,500 entries back (a reader paging backward) against
  the newest page: the same cost wherever the page starts.
- `list_page_10k`: `list_page(limit=50)` by last activity over 10,000 sessions, from the middle
  of the listing, against `list_sessions_page(50)` by creation from the same depth (the keyset
  listing that existed before).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

from bench.store import SURFACE, USER, compacted_session, persist, start_host
from bench.timing import Figure, interleaved
from dsh_host.session.events import Event, SessionHeader

PAGE = 200
SESSIONS = 10_000
LISTED = 50


def surface_page_figures(workdir: Path) -> Iterator[Figure]:
    home = workdir / "surface"
    with start_host(home) as host:
        persist(host, "log-200k", compacted_session(200_000))
    with start_host(home) as host:  # a fresh host: the session is not live
        query = host.services.session_query
        loop = asyncio.new_event_loop()
        try:
            skipped = loop.run_until_complete(query.read_surface_page("log-200k", limit=1000))
            skipped = loop.run_until_complete(query.read_surface_page("log-200k", before=skipped.before, limit=500))
            deep_before = skipped.before

            def whole() -> None:
                assert len(loop.run_until_complete(query.read_surface("log-200k")).events) == SURFACE

            def page() -> None:
                assert len(loop.run_until_complete(query.read_surface_page("log-200k", limit=PAGE)).entries) == PAGE

            def deep() -> None:
                found = loop.run_until_complete(query.read_surface_page("log-200k", before=deep_before, limit=PAGE))
                assert len(found.entries) == PAGE

            full, newest_page, deep_page = interleaved(whole, page, deep, rounds=10)
        finally:
            loop.close()
    yield Figure.timed(
        "surface_page_200k",
        newest_page,
        full,
        target=0.25,
        note=f"session_query.read_surface_page of the newest {PAGE} entries of a persisted 200,000-event log "
        f"(2,000 on the surface) vs its read_surface of the whole surface",
    )
    yield Figure.timed(
        "surface_page_deep_vs_newest",
        deep_page,
        newest_page,
        target=1.5,
        note=f"the same read of {PAGE} entries 1,500 back from the newest vs the newest page",
    )


def list_page_figure(workdir: Path) -> Figure:
    home = workdir / "listing"
    with start_host(home) as host:
        for i in range(SESSIONS):
            header = SessionHeader(id=f"session-{i:05d}", created_at=1_700_000_000_000 + i, cwd=f"/work/p{i % 50}")
            prompt = {"content": [{"type": "text", "text": "x"}], "source": USER}
            # Activity in another order than creation, so the two listings differ.
            active = 1_700_000_000_000 + (i * 7919) % SESSIONS
            host.store.append(header, [Event("user/message", 0, active, prompt, "append")])
    with start_host(home) as host:
        query = host.services.session_query
        loop = asyncio.new_event_loop()
        try:
            cursor = None
            for _ in range(SESSIONS // 2 // 1000):  # the middle, 1,000 (the most a page holds) at a time
                cursor = loop.run_until_complete(query.list_page(after=cursor, limit=1000)).next
            created = loop.run_until_complete(query.list_sessions_page(SESSIONS // 2))[-1]
            key = (created.created_at, created.id)

            def by_activity() -> None:
                assert len(loop.run_until_complete(query.list_page(after=cursor, limit=LISTED)).records) == LISTED

            def by_creation() -> None:
                assert len(loop.run_until_complete(query.list_sessions_page(LISTED, key))) == LISTED

            baseline, value = interleaved(by_creation, by_activity, rounds=15)
        finally:
            loop.close()
    return Figure.timed(
        "list_page_10k",
        value,
        baseline,
        target=1.5,
        note=f"session_query.list_page of {LISTED} by last activity, from the middle of 10,000 sessions, vs "
        f"list_sessions_page of {LISTED} by creation from the same depth",
    )


def figures(workdir: Path) -> Iterator[Figure]:
    yield from surface_page_figures(workdir)
    yield list_page_figure(workdir)
