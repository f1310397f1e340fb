"""Session leases of the SQLite store: one OS file lock per driven session, beside the database.

A session's lock file is `<database>-leases/<digest>.lock`, the digest a hash of the session id
(ids are arbitrary strings; file names are not). The lock is `flock`'s, on an open file
description, so it dies with the process that holds it, SIGKILL included, and a second open of
the file conflicts even inside one process.

Only driven sessions have a lock file: the holder removes its file as it releases the lock. A
process that opened the file just before that may then lock a file that is no longer there; it
sees that the path no longer names what it locked and tries again, so two holders never hold
two different files of one session. A crashed holder's file stays, unlocked, until the session
is next driven. The folder is private (0700), like the database's own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from dsh_host.files import PRIVATE_FILE_MODE, private_folder
from dsh_host.session.events import Event, SessionHeader
from dsh_host.store.base import SessionBusy, StoreError
from dsh_host.store.codec import encode

LOCKS_SUFFIX = "-leases"
_FIRST_PAUSE_S = 0.005
_LONGEST_PAUSE_S = 0.1


def locks_folder(database: Path) -> Path:
    """The folder holding the lock files of `database`'s sessions (named after the file it serves)."""
    resolved = database.resolve()
    return resolved.with_name(resolved.name + LOCKS_SUFFIX)


def lock_path(folder: Path, session_id: str) -> str:
    """The lock file of `session_id` in `folder` (a string: a lease is taken per new session, and
    path objects would cost more than the system calls)."""
    digest = hashlib.sha256(b"dsh-session\0" + encode(session_id)).hexdigest()
    return os.path.join(folder, f"{digest[:32]}.lock")


class Writes(Protocol):
    """How a lease writes its session: the store's two appends."""

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None: ...

    def append_now(self, header: SessionHeader, events: Sequence[Event]) -> bool: ...


class FileLease:
    """A held lock file: the session's lease until `release` (or the process's end)."""

    def __init__(
        self,
        session_id: str,
        path: str,
        fd: int,
        writes: Writes,
        released: Callable[[FileLease], None],
    ) -> None:
        self._session_id = session_id
        self._path = path
        self._fd: int | None = fd
        self._writes = writes
        self._released = released

    @property
    def session_id(self) -> str:
        return self._session_id

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """The store's `append`, while the lease is held."""
        self._check_held()
        self._writes.append(header, events)

    def append_now(self, header: SessionHeader, events: Sequence[Event]) -> bool:
        """The store's `append_now`, while the lease is held."""
        self._check_held()
        return self._writes.append_now(header, events)

    def _check_held(self) -> None:
        if self._fd is None:
            raise StoreError(f"the lease of session {self._session_id!r} was released")

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            _unlock(self._path, fd)
            self._released(self)


def take(
    folder: Path,
    session_id: str,
    wait: float,
    writes: Writes,
    released: Callable[[FileLease], None],
) -> FileLease:
    """`session_id`'s lease, waiting up to `wait` seconds for it; the lease writes through
    `writes` and reports its release to `released`.

    `SessionBusy` when another open of its lock file (another process, or this one) holds it longer.
    """
    path = lock_path(folder, session_id)
    deadline = time.monotonic() + wait
    pause = _FIRST_PAUSE_S
    while (fd := _try_lock(folder, path)) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SessionBusy.after_waiting(session_id, wait) if wait > 0 else SessionBusy(session_id)
        # Polling: flock has no timeout, and a waiter must be able to give up.
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, _LONGEST_PAUSE_S)
    return FileLease(session_id, path, fd, writes, released)


@contextlib.contextmanager
def held(folder: Path, session_id: str) -> Iterator[None]:
    """Hold `session_id`'s lock for the block (an operation that must not run under a driver)."""
    path = lock_path(folder, session_id)
    fd = _try_lock(folder, path)
    if fd is None:
        raise SessionBusy(session_id)
    try:
        yield
    finally:
        _unlock(path, fd)


def _try_lock(folder: Path, path: str) -> int | None:
    """A descriptor of `path` holding its lock, or None when another holds it."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            _make_folder(folder)  # the first lease of this database (or its folder was removed)
            continue
        except OSError as exc:
            raise StoreError(f"cannot open the session lock file {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        mine = os.fstat(fd)
        if _names(path, mine):
            if stat.S_IMODE(mine.st_mode) != PRIVATE_FILE_MODE:
                # Made under a umask that took the owner's own bits: the next driver must open it too.
                os.fchmod(fd, PRIVATE_FILE_MODE)
            return fd
        os.close(fd)  # its holder removed the file before we locked it: lock the one there now


def _make_folder(folder: Path) -> None:
    try:
        private_folder(folder)
    except OSError as exc:
        raise StoreError(f"cannot create the session lock folder {folder}: {exc.strerror or exc}") from None


def _names(path: str, mine: os.stat_result) -> bool:
    """Whether `path` still names the file whose status is `mine` (the one we hold open)."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    return (at_path.st_dev, at_path.st_ino) == (mine.st_dev, mine.st_ino)


def _unlock(path: str, fd: int) -> None:
    # Removed while still locked: whoever opens the path afterwards gets a new file.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.close(fd)
