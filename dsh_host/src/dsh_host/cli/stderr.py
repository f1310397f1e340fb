"""What the command line shows on stderr while a command runs: log records and progress.

The `dsh.*` loggers' records become one line each, and progress of long work a bar; `main`
sets this up only for commands that run on a host (`--version` needs none of it).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

from dsh_host.cli.progress_bar import drawing_progress


class _OneLine(logging.Formatter):
    """Warnings as one line on stderr; tracebacks only with --debug."""

    def __init__(self, debug: bool) -> None:
        super().__init__("dsh: %(levelname)s: %(message)s")
        self._debug = debug

    def format(self, record: logging.LogRecord) -> str:
        # A copy: other handlers of the same record (a test's log capture) see it unchanged.
        line = logging.makeLogRecord({**record.__dict__, "levelname": record.levelname.lower()})
        if not self._debug and record.exc_info:
            exc = record.exc_info[1]
            line.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            line.args, line.exc_info, line.exc_text = (), None, None
        return super().format(line)


@contextlib.contextmanager
def logging_to_stderr(debug: bool) -> Iterator[None]:
    """Show the `dsh.*` loggers' records on stderr, one line each, until the command returns.

    The previous configuration of the `dsh` logger comes back afterwards, so `main` called in
    a process (a test, a host embedding the command) leaves no handler behind.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine(debug))
    logger = logging.getLogger("dsh")
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    logger.propagate = False
    try:
        # Progress of long work (first-open indexing) is a bar on a terminal, not log lines.
        with drawing_progress(sys.stderr):
            yield
    finally:
        logger.handlers[:], level, logger.propagate = saved
        logger.setLevel(level)
