"""Progress of long library work (a store's first-open indexing), told through logging.

Library code never draws: it logs INFO records on the `dsh.progress` logger carrying `task`,
`done` and `total`, and a front end (the CLI's progress bar) shows them as it likes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

_logger = logging.getLogger("dsh.progress")


def progress_reporter(task: str) -> Callable[[int, int], None]:
    """A `progress(done, total)` callback that logs `task`'s progress on `dsh.progress`."""

    def report(done: int, total: int) -> None:
        _logger.info("%s: %d of %d", task, done, total, extra={"task": task, "done": done, "total": total})

    return report
