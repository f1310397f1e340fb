"""Building a source's index: list the agent's files, read what changed, commit in batches.

One build per source and data dir runs at a time: a process that cannot take the build's lock
file answers from what the running build has committed and never waits for it. Within a
process the sources of one data dir build one after another. Files read from their start are
parsed in worker processes (`workers`) when there is enough to read (parsing holds the GIL;
the builder's process writes the index meanwhile); files that grew are read on in the builder's thread, since
they need what the index holds. What is read is committed every few files or megabytes, so a
build that is interrupted keeps what it finished and the next one goes on from there; a cancel
stops it between files (worker processes are ended).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import stat
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, TypeVar

from dsh_host.files import private_file
from dsh_host.sources import IndexProgress
from dsh_sources.index import FileEntry, FileRead, SourceIndex, message_rows
from dsh_sources.lines import ReadCancelled
from dsh_sources.reading import commit, read_file, unchanged
from dsh_sources.transcript import StoreFormat, StoreRead, TranscriptFormat
from dsh_sources.workers import SessionRows, Workers, worker_count

POOL_BYTES = 32 * 1024 * 1024
"""Files read from their start are parsed in worker processes when they hold more than this in all."""
BATCH_FILES = 256
BATCH_BYTES = 64 * 1024 * 1024
BATCH_SECONDS = 0.5
SLOT_POLL_SECONDS = 0.05
"""How often a build waiting for another source of the same data dir checks its cancel."""
F = TypeVar("F")
"""The format a build reads: a `TranscriptFormat` (files) or a `StoreFormat` (stores)."""
_SLOTS: dict[Path, threading.Lock] = {}
_SLOTS_LOCK = threading.Lock()


def _slot(index: Path) -> threading.Lock:
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(index, threading.Lock())


def run_alone(index: SourceIndex, lock: BuildLock, cancel: threading.Event, build: Callable[[], None]) -> bool:
    """Run `build` as the one builder of a source (`lock`); False when another process is, or `cancel` came first.

    Waiting for this process's other sources of `index` to finish their builds is cancellable:
    a source closed meanwhile does not wait for another source's build.
    """
    slot = _slot(index.path)
    while not slot.acquire(timeout=SLOT_POLL_SECONDS):
        if cancel.is_set():
            return False
    try:
        if not lock.acquire():
            return False
        try:
            build()
        finally:
            lock.release()
    finally:
        slot.release()
    return True


@dataclass(frozen=True)
class _Task:
    path: str
    info: os.stat_result
    entry: FileEntry | None
    grows: bool
    """Whether the file may be read on from its entry (else it is read from its start)."""

    @property
    def cost(self) -> int:
        return (
            self.info.st_size - self.entry.seen.offset if self.grows and self.entry is not None else self.info.st_size
        )


class BuildLock:
    """The lock file that makes one process the builder of a source's index."""

    def __init__(self, path: Path) -> None:
        private_file(path)
        self._path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if no other process holds it (never waits)."""
        fd = os.open(self._path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class IndexBuild(ABC, Generic[F]):
    """What every build of a source's index shares: its lock, its progress and how it is run and told.

    A subclass says what a build does (`_build`): `Builder` for an agent's files, `StoreUpdates`
    (`stores`) for an agent that keeps its sessions in one store.
    """

    def __init__(self, name: str, fmt: F, index: SourceIndex) -> None:
        self.name = name
        self.format = fmt
        self.index = index
        self.progress = IndexProgress()
        self._lock = BuildLock(index.path.parent / f"build-{name}.lock")

    def run(self, cancel: threading.Event, report: Callable[[IndexProgress], None]) -> bool:
        """Build now; False when another process is the builder or `cancel` came first (nothing was done)."""
        return run_alone(self.index, self._lock, cancel, lambda: self._build(cancel, report))

    @abstractmethod
    def _build(self, cancel: threading.Event, report: Callable[[IndexProgress], None]) -> None:
        """Bring the index up to date, telling `report` how far it is (run while holding the lock)."""

    def _tell(self, report: Callable[[IndexProgress], None]) -> None:
        with contextlib.suppress(Exception):  # recording how far a build is must never stop it
            self.index.record_build(self.progress)
        report(self.progress)


class Builder(IndexBuild[TranscriptFormat]):
    """Builds one source's index from its files (see the module's docstring); `progress` says how far it is."""

    def _build(self, cancel: threading.Event, report: Callable[[IndexProgress], None]) -> None:
        listed: dict[str, os.stat_result] = {}
        for path in self.format.files():
            try:
                info = os.stat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                listed[path] = info
        known = self.index.files()
        gone = [path for path in known if path not in listed]
        if gone:
            self.index.forget(gone)
        tasks = [
            _Task(
                path, info, entry, entry is not None and (info.st_dev, info.st_ino) == (entry.seen.dev, entry.seen.ino)
            )
            for path, info in listed.items()
            for entry in (known.get(path),)
            if entry is None or not unchanged(entry, info)
        ]
        self.progress = IndexProgress(0, len(tasks), 0, sum(task.cost for task in tasks), True, False)
        self._tell(report)
        grown = [task for task in tasks if task.grows]
        fresh = sorted((task for task in tasks if not task.grows), key=lambda task: -task.cost)
        batch = Batches[FileRead](self.name, lambda reads, cost: self._commit(reads, cost, report), self.index.release)
        try:
            stopped = self._read(grown, fresh, batch, cancel)
        except BaseException:
            with contextlib.suppress(Exception):  # what stopped the build is what it raises
                batch.finish()
            raise
        if stopped:  # a cancelled build keeps what it can write, and ends quietly
            with contextlib.suppress(Exception):
                batch.finish()
        else:
            batch.finish()
        self.progress = replace(self.progress, building=False, complete=not stopped)
        self._tell(report)

    def _commit(self, reads: list[FileRead], cost: int, report: Callable[[IndexProgress], None]) -> None:
        """Write a batch of reads (in the writer's thread) and say how far the build is."""
        commit(self.format, self.index, reads, None)
        self.progress = replace(
            self.progress,
            files_done=self.progress.files_done + len(reads),
            bytes_done=min(self.progress.bytes_total, self.progress.bytes_done + cost),
        )
        self._tell(report)

    def _read(self, grown: list[_Task], fresh: list[_Task], batch: Batches[FileRead], cancel: threading.Event) -> bool:
        """Read the files that changed into `batch`; True when `cancel` stopped it first."""
        for task in grown:
            if cancel.is_set():
                return True
            with contextlib.suppress(OSError, ReadCancelled):
                batch.add(read_file(self.format, task.path, task.entry, self.index, cancel), task.cost)
        try:
            for read, task in self._fresh_reads(fresh, cancel):
                if cancel.is_set():
                    return True
                batch.add(read, task.cost)
        except ReadCancelled:
            return True
        return False

    def _fresh_reads(self, tasks: list[_Task], cancel: threading.Event) -> Iterator[tuple[FileRead, _Task]]:
        count = worker_count()
        if sum(task.cost for task in tasks) < POOL_BYTES or count < 2 or len(tasks) < 2:
            for task in tasks:
                with contextlib.suppress(OSError):
                    yield read_file(self.format, task.path, None, None, cancel, self.index.path.parent), task
            return
        by_path = {task.path: task for task in tasks}
        with _IDLE.lent(count, cancel) as workers:
            sized = [(task.path, task.cost) for task in tasks]
            for result in workers.reads(self.format, sized, self.index.path.parent, cancel):
                if isinstance(result, FileRead):
                    yield result, by_path[result.path]


class _IdleWorkers:
    """Worker processes between two builds of this process, ended after `IDLE_SECONDS` unused.

    The sources of a data dir build one after another (`dsh sessions index`, `dsh mcp`'s first
    builds): the next one takes the workers the last one finished with instead of starting its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: Workers | None = None
        self._timer: threading.Timer | None = None

    def _release(self) -> Workers | None:
        """The kept workers, no longer kept (their timer stopped)."""
        with self._lock:
            workers, self._workers = self._workers, None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        return workers

    def take(self, count: int) -> Workers:
        """The idle workers when there are `count` of them, else new ones."""
        workers = self._release()
        if workers is not None and workers.count == count and workers.idle():
            return workers
        if workers is not None:
            workers.close()
        return Workers(count)

    @contextlib.contextmanager
    def lent(self, count: int, cancel: threading.Event) -> Iterator[Workers]:
        """`count` workers for one read: kept for the next build when they end it idle and it was not
        cancelled, else ended (tasks in flight or a worker gone: never handed to another build)."""
        workers = self.take(count)
        try:
            yield workers
        finally:
            if workers.idle() and not cancel.is_set():
                self.keep(workers)
            else:
                workers.close()

    def keep(self, workers: Workers) -> None:
        """Keep idle workers for the next build, for `IDLE_SECONDS`."""
        timer = threading.Timer(IDLE_SECONDS, self._expire, (workers,))
        timer.daemon = True
        with self._lock:
            former, self._workers, self._timer = self._workers, workers, timer
        timer.start()
        if former is not None:
            former.close()

    def end(self) -> None:
        """End the idle workers now."""
        workers = self._release()
        if workers is not None:
            workers.close()

    def _expire(self, workers: Workers) -> None:
        with self._lock:
            if self._workers is not workers:
                return
            self._workers, self._timer = None, None
        workers.close()


IDLE_SECONDS = 2.0
"""How long worker processes wait for another build of this process before they end."""
_IDLE = _IdleWorkers()


def end_idle_workers() -> None:
    """End the worker processes kept for the next build (a closing source calls it; so may a test)."""
    _IDLE.end()


def read_store(
    fmt: StoreFormat, path: str, marks: Mapping[str, str], add: SessionRows, cancel: threading.Event, size: int
) -> StoreRead | None:
    """Read a store of `size` bytes, handing each session read again to `add` with its rows as they come.

    A store of `POOL_BYTES` or more is read by the worker processes when there are two cores, each
    its share of the sessions, while the builder's process writes what they hand over. Their reads
    agree unless the store changed between the moments they began: then None, and the read ends as
    an interrupted one does (what was handed over is written; the next check reads the rest). A
    smaller store, or one whose worker died, is read in this process. `lines.ReadCancelled` when
    `cancel` is set.
    """
    count = worker_count()
    if size >= POOL_BYTES and count >= 2:
        try:
            with _IDLE.lent(count, cancel) as workers:
                reads = workers.read_store(fmt, path, marks, add, cancel)
            first = reads[0]
            return next(
                (read for read in reads if read.problem is not None),
                first if reads.count(first) == len(reads) else None,
            )
        except (EOFError, OSError):
            pass  # a worker died (its pipe ended or broke): read it here (what was handed over is written)
    return fmt.read(path, marks, lambda session: add(session, message_rows(session.messages)), cancel)


WAITING = 1
"""Batches that may wait for the writer while it writes another. More let the files go on out to the
workers through a long write (a large file's keys), but each waiting batch is held in memory: with
two, the 2 GB bench's peak over the process tree rose by about 10 MB, near its 150 MB limit."""
T = TypeVar("T")


class Batches(Generic[T]):
    """What a build read, written in batches by a thread of their own (`write(items, cost)` there, and
    `done()` when it ends: a thread's index connection is closed with it).

    The thread that gathers hands each full batch (`BATCH_FILES` items, `max_cost` of cost or
    `BATCH_SECONDS` old) to the writer and goes on, so the workers keep parsing while a batch (a
    large file's keys, the full-text index) is written. At most `WAITING` batches wait while another
    is written, which bounds what is held.
    """

    def __init__(
        self,
        name: str,
        write: Callable[[list[T], int], None],
        done: Callable[[], None],
        max_cost: int = BATCH_BYTES,
    ) -> None:
        self._write_batch = write
        self._done = done
        self._max_cost = max_cost
        self._items: list[T] = []
        self._cost = 0
        self._started = time.monotonic()
        self._full: queue.Queue[tuple[list[T], int] | None] = queue.Queue(maxsize=WAITING)
        self._failure: Exception | None = None
        self._writer = threading.Thread(target=self._write, name=f"dsh-index-{name}", daemon=True)
        self._writer.start()

    def add(self, item: T, cost: int) -> None:
        self._items.append(item)
        self._cost += cost
        if (
            len(self._items) >= BATCH_FILES
            or self._cost >= self._max_cost
            or time.monotonic() - self._started >= BATCH_SECONDS
        ):
            self._hand_over()

    def _hand_over(self) -> None:
        if self._items:
            self._full.put((self._items, self._cost))
        self._items, self._cost = [], 0
        self._started = time.monotonic()

    def finish(self) -> None:
        """Write what is gathered, wait for every batch to be written, and raise what writing raised."""
        if self._writer.is_alive():
            self._hand_over()
            self._full.put(None)
            self._writer.join()
        if self._failure is not None:
            raise self._failure

    def _write(self) -> None:
        try:
            while (batch := self._full.get()) is not None:
                if self._failure is not None:
                    continue  # taken, not written: the gatherer never waits on a writer that failed
                try:
                    self._write_batch(*batch)
                except Exception as failure:  # noqa: BLE001 - raised again in the gathering thread by `finish`
                    self._failure = failure
        finally:
            self._done()
