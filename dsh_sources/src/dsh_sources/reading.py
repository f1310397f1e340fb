"""Reading one file: from its start, or on from where the index stopped when the file only grew.

A file's entry holds its identity (device and inode), the size and mtime it had, how far it was
read and fingerprints of its first bytes and of the bytes just before that offset. A file whose
size and mtime are unchanged is not opened. One that changed is read on from the offset when its
identity and both fingerprints still match and it is not shorter than the offset: it grew. Any
other change (replaced, truncated, rewritten where the fingerprints look) reads it from the start.
A rewrite that keeps the size-independent fingerprints, changing only bytes between the head and
the last few kilobytes before the offset, is not seen: agents append and do not rewrite in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from dsh_sources.index import FileEntry, FileRead, NothingStored, Observed, SourceIndex
from dsh_sources.lines import JsonLines, ReadCancelled
from dsh_sources.transcript import Reread, Stored, Transcript, TranscriptFormat, Update

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json

FINGERPRINT_BYTES = 4096
KEYED_BYTES = 4 * 1024 * 1024
"""Files at least this large are read on from their offset when they grow (the index keeps what that
needs, such as Claude Code's record keys); a smaller one is read again from its start, which costs
less than keeping a key for each of its records."""


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _window(fd: int, start: int, length: int) -> bytes:
    return os.pread(fd, length, start) if length > 0 else b""


def unchanged(entry: FileEntry, info: os.stat_result) -> bool:
    """Whether the file is as the index last saw it (nothing to read)."""
    return (
        (info.st_dev, info.st_ino) == (entry.seen.dev, entry.seen.ino)
        and info.st_size == entry.seen.size
        and info.st_mtime_ns == entry.seen.mtime_ns
    )


def grew(entry: FileEntry, fd: int, info: os.stat_result) -> bool:
    """Whether the open file is the entry's file with bytes only added after the offset."""
    seen = entry.seen
    if not entry.keyed or (info.st_dev, info.st_ino) != (seen.dev, seen.ino) or info.st_size < seen.offset:
        return False
    head = _window(fd, 0, seen.head_len)
    tail_start = max(0, seen.offset - FINGERPRINT_BYTES)
    tail = _window(fd, tail_start, seen.offset - tail_start)
    return _digest(head) == seen.head and _digest(tail) == seen.tail


def read_file(
    fmt: TranscriptFormat,
    path: str,
    entry: FileEntry | None,
    index: SourceIndex | None,
    cancel: threading.Event | None = None,
    spill_dir: Path | None = None,
) -> FileRead:
    """Read `path` on from `entry` when it only grew (with `index` giving what is stored), else from its start.

    A read from the start of a large file may keep its record keys in a `NodeSpill` in
    `spill_dir` (by default the index's folder; without either, in memory). OSError when the file
    cannot be opened or read; `lines.ReadCancelled` when `cancel` is set.
    """
    if spill_dir is None and index is not None:
        spill_dir = index.path.parent
    with open(path, "rb") as file:
        fd = file.fileno()
        info = os.fstat(fd)
        if entry is not None and index is not None and grew(entry, fd, info):
            try:
                state = index.state(entry.pk)
                return _read(fmt, path, file, info, entry, state, index.stored(entry.pk), entry.seen.offset, cancel)
            except Reread:
                pass
        from_start = NothingStored(info.st_size >= KEYED_BYTES, spill_dir)
        try:
            return _read(fmt, path, file, info, entry, None, from_start, 0, cancel)
        except BaseException:
            if from_start.spilled is not None:
                from_start.spilled.discard()
            raise


def _project(
    fmt: TranscriptFormat,
    path: str,
    file: BinaryIO,
    state: Json | None,
    stored: Stored,
    cancel: threading.Event | None,
) -> tuple[Update, JsonLines]:
    """Feed the file's lines from its position to a projector going on from `state`; its update and the lines read."""
    projector = fmt.projector(path, state, stored)
    lines = fmt.records(path)(file, cancel=cancel)
    for record in lines:
        projector.feed(record)
    return projector.finish(), lines


def commit(fmt: TranscriptFormat, index: SourceIndex, reads: list[FileRead], cancel: threading.Event | None) -> None:
    """Write `reads`; a file whose entry another writer changed meanwhile is read again once and written."""
    again: list[FileRead] = []
    for path in index.put(reads):
        with contextlib.suppress(OSError, ReadCancelled):
            again.append(read_file(fmt, path, index.file(path), index, cancel))
    if again:
        index.put(again)


def _read(
    fmt: TranscriptFormat,
    path: str,
    file: BinaryIO,
    info: os.stat_result,
    entry: FileEntry | None,
    state: Json | None,
    stored: Stored,
    offset: int,
    cancel: threading.Event | None,
) -> FileRead:
    fd = file.fileno()
    file.seek(offset)
    update, lines = _project(fmt, path, file, state, stored, cancel)
    end = offset + lines.consumed
    keyed = stored.keeps_nodes
    if not keyed:
        update = replace(update, nodes=())
    head_len = min(FINGERPRINT_BYTES, end)
    tail_start = max(0, end - FINGERPRINT_BYTES)
    fresh = state is None
    skipped, oversized = (0, 0) if fresh or entry is None else (entry.skipped, entry.oversized)
    seen = Observed(
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        end,
        head_len,
        _digest(_window(fd, 0, head_len)),
        _digest(_window(fd, tail_start, end - tail_start)),
    )
    return FileRead(
        path=path,
        seen=seen,
        fresh=fresh,
        skipped=skipped + lines.skipped,
        oversized=oversized + lines.oversized,
        unfinished=lines.unfinished,
        update=update,
        generation=None if entry is None else entry.generation,
        keyed=keyed,
    )


def read_whole(fmt: TranscriptFormat, path: str) -> Transcript | None:
    """The whole file projected at once, without an index (None when it holds no session; OSError if unreadable).

    A last line without its newline counts as skipped, as `dsh sessions check` reports it.
    """
    with open(path, "rb") as file:
        update, lines = _project(fmt, path, file, None, NothingStored(keeps_nodes=False), None)
    facts = update.facts
    if facts is None:
        return None
    return Transcript(
        agent_id=facts.agent_id,
        cwd=facts.cwd,
        created_at=facts.created_at,
        updated_at=facts.updated_at,
        title=facts.title,
        messages=tuple(said.message for said in update.tail),
        skipped=lines.skipped + int(lines.unfinished),
        oversized=lines.oversized,
    )
