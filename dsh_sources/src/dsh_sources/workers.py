"""Worker processes that read files from their start, and stores, while the builder writes the index.

Parsing JSON holds the GIL, so a build that reads gigabytes uses other processes for it. They are
plain `python -c` children with the builder's `sys.path`, fed tasks over a pipe (length-prefixed
pickles: a format and a file in, its read as plain values or the path back; or a format and a
store in, its sessions as they are read and then the store's read back). Nothing of the host's
`__main__` is imported again, so a host script needs no main guard, and a cancelled build kills
them at once. A worker that dies loses only the files it held (skipped this time).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from operator import attrgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING

from dsh_sources.index import FileRead, MessageRow, Observed, message_rows
from dsh_sources.lines import ReadCancelled
from dsh_sources.reading import read_file
from dsh_sources.transcript import Facts, Node, SessionRead, StoreFormat, StoreRead, TranscriptFormat, Update

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json
    from dsh_sources.spill import NodeSpill

_FRAME = struct.Struct("<Q")
IN_FLIGHT = 2
"""Tasks a worker always holds (the file it parses and the next), so it never waits for the builder."""
IN_FLIGHT_MAX = 32
IN_FLIGHT_BYTES = 8 * 1024 * 1024
"""More tasks a worker holds while they are small, up to this many and about these bytes: small files take
well under a millisecond each, less than the builder's thread may wait for the GIL its writer holds."""
PIPE_BYTES = 1024 * 1024
TRIM_BYTES = 8 * 1024 * 1024
"""A worker gives its heap's free memory back after reading a file this large (see `_trim`)."""
"""The size asked of each worker's pipes, so a worker writes its answers on while the builder is busy."""
_BOOT = "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); from dsh_sources.workers import serve; serve()"


def _send(pipe: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_FRAME.pack(len(data)) + data)
    pipe.flush()


def _read_exactly(pipe: IO[bytes], size: int) -> bytes:
    """`size` bytes from an unbuffered pipe (EOFError when it closes first)."""
    chunks, left = [], size
    while left:
        chunk = pipe.read(left)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(pipe: IO[bytes]) -> object:
    (size,) = _FRAME.unpack(_read_exactly(pipe, _FRAME.size))
    return pickle.loads(_read_exactly(pipe, size))


SessionRows = Callable[[SessionRead, Sequence[MessageRow]], None]
"""Where a store's read run by a builder hands each session read again, with its messages as the index's rows."""
_OBSERVED = attrgetter(*(field.name for field in fields(Observed)))
_FACTS = attrgetter(*(field.name for field in fields(Facts)))


ReadValues = tuple[
    str,
    tuple[int, int, int, int, int, int, bytes, bytes],
    bool,
    int,
    int,
    bool,
    "Json",
    "tuple[str, str | None, int, int, str | None, int] | None",
    int,
    "int | None",
    "tuple[Node, ...] | NodeSpill",
    "int | None",
    bool,
    "tuple[MessageRow, ...]",
]
"""A `FileRead` as `_portable` sends it: its fields in order, the `Observed` and `Facts` as their fields."""


def _portable(read: FileRead) -> ReadValues:
    """The read as plain values, its messages made into the index's rows here, so the builder only writes them.

    Plain values: unpickling dataclasses runs Python code per object, in the builder's busiest thread.
    """
    update, facts = read.update, read.update.facts
    return (
        read.path,
        _OBSERVED(read.seen),
        read.fresh,
        read.skipped,
        read.oversized,
        read.unfinished,
        update.state,
        None if facts is None else _FACTS(facts),
        update.keep,
        update.cut,
        update.nodes,
        read.generation,
        read.keyed,
        message_rows(update.tail),
    )


def _restored(values: ReadValues) -> FileRead:
    """A read back from `_portable`'s values."""
    path, seen, fresh, skipped, oversized, unfinished, state, facts, keep, cut, nodes, generation, keyed, rows = values
    update = Update(state, None if facts is None else Facts(*facts), keep, (), cut, nodes)
    return FileRead(path, Observed(*seen), fresh, skipped, oversized, unfinished, update, generation, keyed, rows)


def serve() -> None:
    """A worker's loop: read tasks from stdin until it closes, answer each on stdout.

    A file task (`"file"`, format, path, spill folder) has one answer: the read's values, or the path
    when it cannot be read. A store task (`"store"`, format, path, (marks, share)) has one `"session"`
    frame per session of its share read again, as they are read, then the `"read"` frame with the
    `StoreRead`.
    """
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    while True:
        try:
            task = _receive(stdin)
        except EOFError:
            return
        assert isinstance(task, tuple)
        kind, fmt, path, more = task
        if kind == "store":
            marks, share = more
            hand = lambda session: _send(stdout, ("session", *_session_values(session)))  # noqa: E731
            _send(stdout, ("read", fmt.read(path, marks, hand, None, share)))
            _trim()
            continue
        try:
            read = read_file(fmt, path, None, None, spill_dir=more)
        except OSError:
            _send(stdout, path)
            continue
        _send(stdout, _portable(read))
        if read.seen.size >= TRIM_BYTES:
            del read
            _trim()


def _trim() -> None:
    """Give the C heap's free memory back to the system (glibc; elsewhere nothing).

    A worker lives through many reads: the freed megabytes of a large file's records (or of a store's
    sessions) would otherwise stay in its heap and count in the build's peak memory while the next file
    is read. Only after large reads: it walks the heap, which ten thousand small files should not pay.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # Only a worker that read a large file loads ctypes; the process's own symbols hold libc's, so
    # no library search (find_library runs ldconfig).
    import ctypes

    return getattr(ctypes.CDLL(None), "malloc_trim", None)


def _session_values(session: SessionRead) -> tuple[object, ...]:
    """A store's session as plain values, its messages made into the index's rows here."""
    facts = _FACTS(session.facts)
    return session.agent_id, session.mark, facts, message_rows(session.messages), session.skipped


class Workers:
    """`count` worker processes; `reads` hands them files and yields what they read, as it comes."""

    def __init__(self, count: int) -> None:
        argv = [sys.executable, "-c", _BOOT, json.dumps([p for p in sys.path if isinstance(p, str)])]
        self.count = count
        self._processes = [
            # Unbuffered: an answer read ahead into a buffer would never wake the selector.
            subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, close_fds=True)
            for _ in range(count)
        ]
        for process in self._processes:
            for pipe in (process.stdin, process.stdout):
                _widen(pipe)
        self._held: dict[subprocess.Popen[bytes], list[int]] = {}

    def idle(self) -> bool:
        """Whether every worker runs and holds no task (the workers may serve another `reads`)."""
        return not any(self._held.values()) and all(process.poll() is None for process in self._processes)

    def reads(
        self, fmt: TranscriptFormat, tasks: list[tuple[str, int]], spill_dir: Path, cancel: threading.Event
    ) -> Iterator[FileRead | str]:
        """Read each (path, size) from its start in a worker, in the order given; a read or the unreadable path.

        A worker keeps the record keys of a large file in a `spill.NodeSpill` in `spill_dir`.

        Each worker holds at least `IN_FLIGHT` tasks, more while they are small (see `IN_FLIGHT_BYTES`),
        so it goes on parsing while the builder writes what came back.
        """
        pending = list(reversed(tasks))
        selector = selectors.DefaultSelector()
        held = self._held

        def hand_out(process: subprocess.Popen[bytes]) -> None:
            assert process.stdin is not None
            sizes = held[process]
            while (
                pending
                and (len(sizes) < IN_FLIGHT or (len(sizes) < IN_FLIGHT_MAX and sum(sizes) < IN_FLIGHT_BYTES))
                and not cancel.is_set()
            ):
                path, size = pending.pop()
                _send(process.stdin, ("file", fmt, path, spill_dir))
                sizes.append(size)

        try:
            for process in self._processes:
                held[process] = []
                hand_out(process)
                if held[process]:
                    selector.register(process.stdout, selectors.EVENT_READ, process)  # type: ignore[arg-type]
            while any(held.values()) and not cancel.is_set():
                for key, _ in selector.select(timeout=0.2):
                    process = key.data
                    assert process.stdout is not None
                    try:
                        answer = _receive(process.stdout)
                    except EOFError:  # the worker died: what it held is skipped this time
                        selector.unregister(process.stdout)
                        held[process] = []
                        continue
                    del held[process][0]  # answers come in the order the tasks went
                    hand_out(process)
                    if not held[process]:
                        selector.unregister(process.stdout)
                    if isinstance(answer, tuple):
                        yield _restored(answer)
                    else:
                        assert isinstance(answer, str)
                        yield answer  # the path it could not read
        finally:
            selector.close()

    def read_store(
        self, fmt: StoreFormat, path: str, marks: Mapping[str, str], add: SessionRows, cancel: threading.Event
    ) -> list[StoreRead]:
        """Read a store with every worker, each its share (`StoreFormat.read`); each one's read.

        Each session read again goes to `add` (with its rows) as it comes. `lines.ReadCancelled`
        when `cancel` is set (the workers are left busy: close them); EOFError or OSError when a worker dies.
        """
        reads: dict[subprocess.Popen[bytes], StoreRead] = {}
        with selectors.DefaultSelector() as selector:
            for number, process in enumerate(self._processes):
                assert process.stdin is not None and process.stdout is not None
                _send(process.stdin, ("store", fmt, path, (dict(marks), (number, self.count))))
                self._held[process] = [0]
                selector.register(process.stdout, selectors.EVENT_READ, process)
            while len(reads) < self.count:
                for key, _ in selector.select(timeout=0.2):
                    process = key.data
                    frame = _receive(process.stdout)
                    assert isinstance(frame, tuple)
                    if frame[0] == "read":
                        assert isinstance(frame[1], StoreRead)
                        reads[process] = frame[1]
                        self._held[process] = []
                        selector.unregister(process.stdout)
                        continue
                    _, agent_id, mark, facts, rows, skipped = frame
                    add(SessionRead(agent_id, mark, Facts(*facts), (), skipped), rows)
                if cancel.is_set():
                    raise ReadCancelled
        return [reads[process] for process in self._processes]

    def close(self) -> None:
        """End every worker at once."""
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        for process in self._processes:
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            process.wait()


def _widen(pipe: IO[bytes] | None) -> None:
    """Ask for a pipe of `PIPE_BYTES` (Linux; elsewhere, or when refused, it keeps its size)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if pipe is not None and setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), setsize, PIPE_BYTES)


def worker_count() -> int:
    """How many workers a build uses: the cores this process may run on, at most two (one builder writes)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return min(2, cores)
