"""Reading another agent's JSONL file: every line that is a JSON object, and a count of the rest.

The agents write these files while dsh reads them and change their formats between versions,
so nothing in a line can stop a read: a line that is not JSON (cut short by a crash, or
garbage), not an object, or nested beyond what the parser takes is skipped and counted. A line
longer than `MAX_LINE_BYTES` is skipped unread: it is consumed in bounded pieces, never held
whole. Lines of several megabytes (pasted images) are read as usual.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

MAX_LINE_BYTES = 64 * 1024 * 1024
_DRAIN_BYTES = 1024 * 1024

_decode = json.JSONDecoder().decode


class JsonLines:
    """The JSON-object lines of a binary file, with counts of the lines left out.

    Iterate once; afterwards `skipped` counts every line left out (blank lines are not lines)
    and `oversized` those of them that were over `limit` bytes.
    """

    def __init__(self, file: IO[bytes], limit: int = MAX_LINE_BYTES) -> None:
        self._file = file
        self._limit = limit
        self.skipped = 0
        self.oversized = 0

    def __iter__(self) -> Iterator[dict[str, JsonValue]]:
        readline, limit = self._file.readline, self._limit
        while True:
            line = readline(limit + 1)
            if not line:
                return
            if len(line) > limit and not line.endswith(b"\n"):
                self._drain()
                self.skipped += 1
                self.oversized += 1
                continue
            try:
                record = _decode(line.decode("utf-8", "surrogatepass"))
            except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deep
                if line.strip():
                    self.skipped += 1
                continue
            if type(record) is dict:
                yield record
            else:
                self.skipped += 1

    def _drain(self) -> None:
        """Consume the rest of an over-long line, a bounded piece at a time."""
        readline, size = self._file.readline, min(self._limit + 1, _DRAIN_BYTES)
        while True:
            piece = readline(size)
            if not piece or piece.endswith(b"\n"):
                return
