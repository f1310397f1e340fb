"""The CLI's progress bar: draws `dsh.progress` records (see `dsh_host.progress`) on a terminal.

Work that ends within about a second draws nothing: the bar appears once a task has been
reporting for `DELAY_SECONDS`. A task measured in bytes as well shows them, its rate and the
time left.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from dsh_host.progress import byte_size

WIDTH = 30
DELAY_SECONDS = 1.0


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class ProgressBar(logging.Handler):
    """Redraw one line per progress record on `stream`, when it is a terminal; end it when done."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(logging.INFO)
        self._stream = stream
        self._clock = clock
        self._started: dict[str, float] = {}
        self._drawn: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        task, done, total = getattr(record, "task", None), getattr(record, "done", None), getattr(record, "total", None)
        if not isinstance(task, str) or not isinstance(done, int) or not isinstance(total, int) or total <= 0:
            return
        if not self._stream.isatty():
            return
        now = self._clock()
        started = self._started.setdefault(task, now)
        finished = done >= total
        if finished:
            del self._started[task]
        if now - started < DELAY_SECONDS and task not in self._drawn:
            return
        filled = WIDTH * min(done, total) // total
        line = f"\rdsh: {task} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}"
        bytes_done, bytes_total = getattr(record, "bytes_done", 0), getattr(record, "bytes_total", 0)
        if isinstance(bytes_done, int) and isinstance(bytes_total, int) and bytes_total > 0:
            line += f" files, {byte_size(bytes_done)} of {byte_size(bytes_total)}"
            elapsed = now - started
            if elapsed > 0 and 0 < bytes_done < bytes_total:
                rate = bytes_done / elapsed
                line += f", {byte_size(rate)}/s, {_duration((bytes_total - bytes_done) / rate)} left"
        self._drawn.add(task)
        self._stream.write(line + "\x1b[K" + ("\n" if finished else ""))
        if finished:
            self._drawn.discard(task)
        self._stream.flush()


@contextlib.contextmanager
def drawing_progress(stream: TextIO, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Draw `dsh.progress` records on `stream` (and nowhere else) until the block ends."""
    logger = logging.getLogger("dsh.progress")
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers[:] = [ProgressBar(stream, clock)]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers[:], level, logger.propagate = saved
        logger.setLevel(level)
