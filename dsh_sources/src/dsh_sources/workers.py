"""Worker processes that read files from their start while the builder writes the index.

Parsing JSON holds the GIL, so a build that reads gigabytes uses other processes for it. They are
plain `python -c` children with the builder's `sys.path`, fed one task at a time over a pipe
(length-prefixed pickles: a format and a path in, a `FileRead` or the path back). Nothing of the
host's `__main__` is imported again, so a host script needs no main guard, and a cancelled build
kills them at once. A worker that dies loses only the file it was reading (skipped this time).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO

from dsh_sources.index import FileRead, message_rows
from dsh_sources.reading import read_file
from dsh_sources.transcript import TranscriptFormat

_FRAME = struct.Struct("<Q")
IN_FLIGHT = 3
"""Tasks a worker holds at once."""
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


def _portable(read: FileRead) -> FileRead:
    """The read with its messages made into the index's rows here, so the builder only writes them."""
    return replace(read, update=replace(read.update, tail=()), rows=message_rows(read.update.tail))


def serve() -> None:
    """A worker's loop: read tasks from stdin until it closes, answer each on stdout."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    while True:
        try:
            task = _receive(stdin)
        except EOFError:
            return
        assert isinstance(task, tuple)
        fmt, path, spill_dir = task
        try:
            answer: FileRead | str = _portable(read_file(fmt, path, None, None, spill_dir=spill_dir))
        except OSError:
            answer = path
        _send(stdout, answer)


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
        self._held: dict[subprocess.Popen[bytes], int] = {}

    def idle(self) -> bool:
        """Whether every worker runs and holds no task (the workers may serve another `reads`)."""
        return not any(self._held.values()) and all(process.poll() is None for process in self._processes)

    def reads(
        self, fmt: TranscriptFormat, paths: list[str], spill_dir: Path, cancel: threading.Event
    ) -> Iterator[FileRead | str]:
        """Read each path from its start in a worker (handed out in the order given); a read or the unreadable path.

        A worker keeps the record keys of a large file in a `spill.NodeSpill` in `spill_dir`.

        Each worker holds `IN_FLIGHT` tasks, so it goes on parsing while the builder writes what came back.
        """
        pending = list(reversed(paths))
        selector = selectors.DefaultSelector()
        held = self._held

        def hand_out(process: subprocess.Popen[bytes]) -> None:
            assert process.stdin is not None
            while pending and held[process] < IN_FLIGHT and not cancel.is_set():
                _send(process.stdin, (fmt, pending.pop(), spill_dir))
                held[process] += 1

        try:
            for process in self._processes:
                held[process] = 0
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
                        held[process] = 0
                        continue
                    held[process] -= 1
                    hand_out(process)
                    if not held[process]:
                        selector.unregister(process.stdout)
                    yield answer  # type: ignore[misc]
        finally:
            selector.close()

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


def worker_count() -> int:
    """How many workers a build uses: the cores this process may run on, at most two (one builder writes)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return min(2, cores)
