"""The session sources' index builds as `dsh mcp` drives them: started once, waited for briefly, reported.

A source that keeps an index of an agent's files (`IndexedSource`) may take minutes to build it
on a large agent home, longer than an MCP client waits for a tool. `dsh mcp` starts every such
build in the background as soon as it serves; from then on the sources answer from what is
indexed. A search waits a bounded time for unfinished builds, then answers from what is
indexed so far and says how far each unfinished build has come. The builds go on across calls;
closing the host's sources at the end cancels them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh_host.errors import DshError
from dsh_host.progress import byte_size
from dsh_host.sources import IndexedSource, IndexProgress

if TYPE_CHECKING:
    from dsh_host.sources.registry import SessionSources

log = logging.getLogger("dsh.mcp")

POLL_SECONDS = 0.05
"""How often a waiting search asks the sources how far their builds are (a cheap call)."""


class SourceIndexes:
    """The indexed sources among `sources` (a host's), their builds and their progress."""

    def __init__(self, sources: SessionSources) -> None:
        self._sources = sources
        self._starting: asyncio.Future[list[tuple[str, IndexedSource]]] | None = None
        self._hurry = asyncio.Event()

    def line(self, unfinished: dict[str, IndexProgress]) -> str:
        """The one line a partial answer carries, naming each source by its agent's display name."""
        return progress_line({self._sources.display_name(name): state for name, state in unfinished.items()})

    def hurry(self) -> None:
        """Wait no more for the builds: searches answer at once from what is indexed (the end has
        begun, and the calls in flight have a short grace to answer)."""
        self._hurry.set()

    def start(self) -> None:
        """Start every indexed source's build in the background, once (on a worker thread: opening a
        source and starting its build may block). Needs a running event loop."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(asyncio.to_thread(self._start_builds))
            self._starting.add_done_callback(_log_failure)

    def _start_builds(self) -> list[tuple[str, IndexedSource]]:
        started: list[tuple[str, IndexedSource]] = []
        for name in self._sources.names:
            try:
                source = self._sources.get(name)
            except (DshError, OSError) as exc:  # a source that cannot open says so to every call that reads it
                log.debug("mcp: the %s source does not open: %s", name, exc)
                continue
            if not isinstance(source, IndexedSource):
                continue
            try:
                source.build_index(background=True)
            except (DshError, OSError) as exc:  # one source that cannot index leaves the others searchable
                log.warning("mcp: cannot index the %s sessions: %s", name, exc)
                continue
            started.append((name, source))
        return started

    async def unfinished(self, wait: float) -> dict[str, IndexProgress]:
        """The progress of the builds still unfinished after waiting up to `wait` seconds for them, by source.

        Empty when every index is complete; the wait ends as soon as they all are. (A build just
        started may not say it is running yet: an unfinished index is waited for either way.)
        """
        self.start()
        assert self._starting is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        await asyncio.wait({self._starting}, timeout=wait)
        if not self._starting.done() or self._starting.exception() is not None:
            return {}  # the sources are still opening (or failed to): the search says so itself
        indexed = self._starting.result()
        if not indexed:
            return {}
        while True:
            progress = await asyncio.to_thread(_progress_of, indexed)
            if not progress or loop.time() >= deadline or self._hurry.is_set():
                return progress
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), min(POLL_SECONDS, max(deadline - loop.time(), 0)))


def _log_failure(starting: asyncio.Future[list[tuple[str, IndexedSource]]]) -> None:
    if not starting.cancelled() and starting.exception() is not None:
        log.error("mcp: starting the index builds failed: %s", starting.exception(), exc_info=starting.exception())


def _progress_of(indexed: Sequence[tuple[str, IndexedSource]]) -> dict[str, IndexProgress]:
    """The progress of each incomplete index among `indexed`, by source name."""
    states = ((name, source.index_progress()) for name, source in indexed)
    return {name: state for name, state in states if not state.complete}


def progress_json(progress: IndexProgress) -> dict[str, int]:
    """A build's progress as `search_sessions` reports it."""
    return {
        "filesDone": progress.files_done,
        "filesTotal": progress.files_total,
        "bytesDone": progress.bytes_done,
        "bytesTotal": progress.bytes_total,
    }


def progress_line(unfinished: dict[str, IndexProgress]) -> str:
    """One line saying that a search answered from partial indexes, and how far each has come."""
    parts = ", ".join(f"{name} {_how_far(state)}" for name, state in unfinished.items())
    return (
        f"Still indexing sessions ({parts}): these results come from what is indexed so far; "
        "search again later for the rest."
    )


def _how_far(state: IndexProgress) -> str:
    if not state.files_total:
        return "listing files"
    done, total = byte_size(state.bytes_done), byte_size(state.bytes_total)
    return f"{state.files_done:,} of {state.files_total:,} files ({done} of {total})"
