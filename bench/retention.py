"""Retention benchmark: one-shot head+tail retention of a large text against encoding it once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from bench.timing import Figure, best_of
from dsh_retention import retain_head_tail

TEXT_BYTES = 50_000_000
KEEP_BYTES = 32 * 1024
# ASCII with two-, three- and four-byte code points, so no ASCII-only shortcut applies.
LINE = "2024-06-01 build step ok — naïve café ¥ 漢字 😀 exit=0 elapsed=12ms\n"


def figures(workdir: Path) -> Iterator[Figure]:
    """Retaining 32 KiB head + 32 KiB tail of 50 MB should cost at most twice one UTF-8 encode."""
    line_bytes = len(LINE.encode("utf-8"))
    text = LINE * (TEXT_BYTES // line_bytes)

    baseline = best_of(lambda: text.encode("utf-8"))
    value = best_of(lambda: retain_head_tail(text, KEEP_BYTES, KEEP_BYTES))
    yield Figure(
        name="retention_head_tail_50MB",
        value=value,
        baseline=baseline,
        target=2.0,
        note="retain_head_tail(32 KiB, 32 KiB) of 50 MB mixed-width text vs one text.encode('utf-8')",
    )
