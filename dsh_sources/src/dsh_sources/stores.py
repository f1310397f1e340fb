"""Indexing an agent that keeps many sessions in one store (OpenCode's database): `StoreUpdates`.

A store is one row of the index's `files` and each of its sessions a row of `sessions` (keyed
by the store and the agent's id), so listings, searches and reads answer from the index as they
do for one-session files. What differs is how a store is brought up to date: its format says
how it looks now (`StoreFormat.signature`: for a database the sizes and times of the file and
of its write-ahead log, which change at different moments), and a store whose signature moved
is read for a mark of each session (a database's `time_updated` and row counts); only sessions
whose mark moved are read again, and sessions no longer in it leave the index. A store that
cannot be read (locked, corrupt) keeps what the index holds of it and is reported as a problem.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from dsh_host.sources import IndexProgress
from dsh_sources.build import Batches, IndexBuild, read_store
from dsh_sources.index import MessageRow
from dsh_sources.lines import ReadCancelled
from dsh_sources.transcript import SessionRead, StoreFormat, StoreRead

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json


STORE_BATCH_BYTES = 1024 * 1024
"""Bytes of message text a batch of a store's sessions holds at most while it waits to be written."""


class StoreUpdates(IndexBuild[StoreFormat]):
    """Brings one source's stores into the index (see the module's docstring); `progress` says how far.

    `run` brings every store up to date.
    """

    def _build(self, cancel: threading.Event, report: Callable[[IndexProgress], None]) -> None:
        listed = list(self.format.stores())
        gone = [path for path in self.index.files() if path not in listed]
        if gone:
            self.index.forget(gone)
        states = {path: self.index.store_state(path) for path in listed}
        stale = [path for path in listed if self._stale(path, states[path])]
        sizes = [_size(path) for path in stale]
        self.progress = IndexProgress(0, len(stale), 0, sum(sizes), True, False)
        self._tell(report)
        for path, size in zip(stale, sizes, strict=True):
            try:
                self._read(path, states[path], cancel, size)
            except ReadCancelled:
                break
            done = self.progress
            self.progress = replace(done, files_done=done.files_done + 1, bytes_done=done.bytes_done + size)
            self._tell(report)
        self.progress = replace(self.progress, building=False, complete=not cancel.is_set())
        self._tell(report)

    def _stale(self, path: str, state: Json | None) -> bool:
        """Whether the store looks different from its `state` of the last read (or has no signature to compare)."""
        signature = self.format.signature(path)
        return state is None or signature is None or state.get("signature") != list(signature)

    def _read(self, path: str, state: Json | None, cancel: threading.Event, size: int | None = None) -> None:
        """Read the store (`state`: its last read) and write what changed (`lines.ReadCancelled` on `cancel`).

        The sessions read again are written in batches as they come, by a thread of their own, so
        a read interrupted midway keeps them and the next goes on with the others.
        """
        if cancel.is_set():
            raise ReadCancelled
        marks = (state or {}).get("marks") or {}
        written = 0

        def add(session: SessionRead, rows: Sequence[MessageRow]) -> None:
            nonlocal written
            written += 1
            batch.add((session, rows), sum(len(row[7]) for row in rows))

        batch = Batches[tuple[SessionRead, Sequence[MessageRow]]](
            self.name,
            lambda sessions, _: self.index.put_store_sessions(path, sessions),
            self.index.release,
            STORE_BATCH_BYTES,
        )
        try:
            read = read_store(self.format, path, marks, add, cancel, _size(path) if size is None else size)
        except BaseException:
            with contextlib.suppress(Exception):  # what stopped the read is what it raises
                batch.finish()
            raise
        batch.finish()
        if read is None:
            return  # readers that saw different stores: what they read stands, the next check reads on
        if not written and state is not None and _same(read, state):
            return  # nothing moved (the older JSON folder, which has no signature, is read at every check)
        self.index.put_store(read)

    def update(self, paths: list[str], cancel: threading.Event) -> bool:
        """Read the stores among `paths` that changed and forget those that are gone; whether the index changed."""
        changed = False
        gone = [path for path in paths if not os.path.lexists(path)]
        if gone:
            self.index.forget(gone)
            changed = True
        for path in paths:
            if path in gone:
                continue
            state = self.index.store_state(path)
            if self._stale(path, state):
                try:
                    self._read(path, state, cancel)
                except ReadCancelled:
                    break
                changed = True
        return changed

    def reports(self, agent_id: str | None) -> list[tuple[str, str | None, int, int]]:
        """(store, agent id or None, records skipped, 0) for each session (or none) with records left out."""
        out: list[tuple[str, str | None, int, int]] = []
        for path in sorted(self.index.files()):
            skipped = (self.index.store_state(path) or {}).get("skipped") or {}
            for held, count in sorted(skipped.items()):
                if count and (agent_id is None or held == agent_id):
                    out.append((path, held or None, count, 0))
        return out

    def problems(self) -> list[str]:
        """A store the last read could not read: its sessions are as they were read before."""
        out: list[str] = []
        for path in sorted(self.index.files()):
            problem = (self.index.store_state(path) or {}).get("problem")
            if problem:
                shown = json.dumps(path, ensure_ascii=False)
                out.append(f"{shown} could not be read ({problem}): its sessions are shown as last read")
        return out

    def rank(self, path: str) -> int:
        return self.format.rank(path)


def _size(path: str) -> int:
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(path + suffix).st_size
        except OSError:
            continue
    return total


def _same(read: StoreRead, state: Json) -> bool:
    """Whether ending `read`, which read no session again, would change nothing the index holds of its store."""
    skipped = state.get("skipped") or {}
    return (
        read.problem is None
        and state.get("problem") is None
        and read.marks == state.get("marks")
        and read.skipped == skipped.get("", 0)
        and (None if read.signature is None else list(read.signature)) == state.get("signature")
    )
