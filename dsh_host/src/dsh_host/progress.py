"""Progress of long library work (a store's first-open indexing), told through logging.

Library code never draws: it logs INFO records on the `dsh.progress` logger carrying `task`,
`done` and `total` (and, for work measured in bytes as well, `bytes_done` and `bytes_total`),
and a front end (the CLI's progress bar) shows them as it likes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

_logger = logging.getLogger("dsh.progress")


def report_progress(task: str, done: int, total: int, *, bytes_done: int = 0, bytes_total: int = 0) -> None:
    """Log that `task` has done `done` of `total` items (and `bytes_done` of `bytes_total` bytes)."""
    extra = {"task": task, "done": done, "total": total, "bytes_done": bytes_done, "bytes_total": bytes_total}
    _logger.info("%s: %d of %d", task, done, total, extra=extra)


def progress_reporter(task: str) -> Callable[[int, int], None]:
    """A `progress(done, total)` callback that logs `task`'s progress on `dsh.progress`."""

    def report(done: int, total: int) -> None:
        report_progress(task, done, total)

    return report


def byte_size(count: float) -> str:
    """A byte count for people: `512 B`, `1.2 MB`, `5.1 GB`."""
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")
