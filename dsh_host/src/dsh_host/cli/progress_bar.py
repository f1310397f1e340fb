"""The CLI's progress bar: draws `dsh.progress` records (see `dsh_host.progress`) on a terminal."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TextIO

WIDTH = 30


class ProgressBar(logging.Handler):
    """Redraw one line per progress record on `stream`, when it is a terminal; end it when done."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.INFO)
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        task, done, total = getattr(record, "task", None), getattr(record, "done", None), getattr(record, "total", None)
        if not isinstance(task, str) or not isinstance(done, int) or not isinstance(total, int) or total <= 0:
            return
        if not self._stream.isatty():
            return
        filled = WIDTH * min(done, total) // total
        line = f"\rdsh: {task} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}"
        self._stream.write(line + ("\n" if done >= total else ""))
        self._stream.flush()


@contextlib.contextmanager
def drawing_progress(stream: TextIO) -> Iterator[None]:
    """Draw `dsh.progress` records on `stream` (and nowhere else) until the block ends."""
    logger = logging.getLogger("dsh.progress")
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers[:] = [ProgressBar(stream)]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers[:], level, logger.propagate = saved
        logger.setLevel(level)
