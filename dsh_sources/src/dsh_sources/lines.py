"""Reading another agent's JSONL file: every line that is a JSON object, and a count of the rest.

The agents write these files while dsh reads them and change their formats between versions,
so nothing in a line can stop a read: a line that is not JSON (cut short by a crash, or
garbage), not an object, or nested beyond what the parser takes is skipped and counted. A line
longer than `MAX_LINE_BYTES` is skipped unread: it is consumed in bounded pieces, never held
whole. Lines of several megabytes (pasted images) are read as usual.

A last line without its newline is not read: the agent may still be writing it. It counts as
`unfinished` (a crash that cut it leaves it so), and the next read, once the line is whole,
starts at its first byte (`consumed`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

MAX_LINE_BYTES = 64 * 1024 * 1024
_DRAIN_BYTES = 1024 * 1024
_CANCEL_EVERY = 256

_decode = json.JSONDecoder().decode


class ReadCancelled(Exception):
    """A read stopped between two lines because its cancel signal was set."""


class JsonLines:
    """The JSON-object lines of a binary file from its current position, with counts of the rest.

    Iterate once; afterwards `skipped` counts every line left out (blank lines are not lines),
    `oversized` those of them that were over `limit` bytes, `consumed` the bytes read through
    the last whole line, and `unfinished` whether a last line without its newline was left.
    `cancel`, checked every few hundred lines, stops the read with `ReadCancelled`.
    """

    def __init__(self, file: IO[bytes], limit: int = MAX_LINE_BYTES, cancel: threading.Event | None = None) -> None:
        self._file = file
        self._limit = limit
        self._cancel = cancel
        self.skipped = 0
        self.oversized = 0
        self.consumed = 0
        self.unfinished = False

    def __iter__(self) -> Iterator[dict[str, JsonValue]]:
        readline, limit, cancel = self._file.readline, self._limit, self._cancel
        count = 0
        while True:
            if cancel is not None:
                count += 1
                if count % _CANCEL_EVERY == 0 and cancel.is_set():
                    raise ReadCancelled
            line = readline(limit + 1)
            if not line:
                return
            if not line.endswith(b"\n"):
                if len(line) > limit:
                    drained = self._drain()
                    if drained is None:
                        self.unfinished = True
                        return
                    self.consumed += len(line) + drained
                    self.skipped += 1
                    self.oversized += 1
                    continue
                self.unfinished = bool(line.strip())
                return
            self.consumed += len(line)
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

    def _drain(self) -> int | None:
        """Consume the rest of an over-long line a bounded piece at a time: its bytes, or None at EOF."""
        readline, size = self._file.readline, min(self._limit + 1, _DRAIN_BYTES)
        total = 0
        while True:
            piece = readline(size)
            if not piece:
                return None
            total += len(piece)
            if piece.endswith(b"\n"):
                return total
