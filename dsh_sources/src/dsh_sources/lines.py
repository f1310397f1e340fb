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
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

MAX_LINE_BYTES = 64 * 1024 * 1024
_BLOCK_BYTES = 1024 * 1024
_BLANK = " \t\n\r\x0b\x0c"
"""What `bytes.strip` strips: a line of only these is blank, not skipped."""

_DECODER = json.JSONDecoder()
_decode = _DECODER.decode
_scan: Callable[[str, int], tuple[JsonValue, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
"""The scanner `decode` parses with (typeshed does not name it): `decode` is this plus checks of
the whitespace around the value, which the agents never write, so a line is scanned directly and
only one that does not scan whole is handed to `decode` to decide."""


class ReadCancelled(Exception):
    """A read stopped between two lines because its cancel signal was set."""


class JsonLines:
    """The JSON-object lines of a binary file from its current position, with counts of the rest.

    Iterate once; afterwards `skipped` counts every line left out (blank lines are not lines),
    `oversized` those of them that were over `limit` bytes, `consumed` the bytes read through
    the last whole line, and `unfinished` whether a last line without its newline was left.
    The file is read in blocks of at most a mebibyte (never more than `limit`), split into lines;
    a line is held only while it is under `limit`. `cancel`, checked between blocks, stops the
    read with `ReadCancelled`.
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
        read, limit, cancel = self._file.read, self._limit, self._cancel
        size = min(_BLOCK_BYTES, limit + 1)
        # The start of a line whose newline has not come yet (at most `limit` bytes), grown in
        # place: a line of several megabytes is not copied again for each block it spans.
        pending = bytearray()
        dropping = 0  # bytes of an over-long line passed over so far (0: not in one)
        while True:
            if cancel is not None and cancel.is_set():
                raise ReadCancelled
            block = read(size)
            if not block:
                self.unfinished = bool(dropping) or bool(pending.strip())
                return
            start = 0
            if dropping or pending:
                newline = block.find(b"\n")
                if newline < 0:
                    if dropping or len(pending) + len(block) > limit:
                        dropping += len(pending) + len(block)
                        pending = bytearray()
                    else:
                        pending += block
                    continue
                start = newline + 1
                if dropping or len(pending) + newline > limit:
                    self.consumed += dropping + len(pending) + start
                    self.skipped += 1
                    self.oversized += 1
                    dropping, pending = 0, bytearray()
                else:
                    pending += memoryview(block)[:start]
                    joined, pending = pending, bytearray()
                    self.consumed += len(joined)
                    record = self._record(joined)
                    del joined  # not held while the record is used
                    if record is not None:
                        yield record
            end = block.rfind(b"\n") + 1
            if end <= start:
                pending, dropping = _held(block[start:], limit)
                continue
            self.consumed += end - start
            for line in block[start : end - 1].split(b"\n"):
                try:  # this loop runs once per line of gigabytes: a whole JSON object takes one call
                    text = line.decode("utf-8", "surrogatepass")
                    record, stop = _scan(text, 0)
                    if stop != len(text) or type(record) is not dict:
                        raise ValueError
                except (StopIteration, ValueError, RecursionError):
                    record = self._record(line)
                    if record is None:
                        continue
                yield record
            pending, dropping = _held(block[end:], limit)

    def _record(self, line: bytes | bytearray) -> dict[str, JsonValue] | None:
        """The line's JSON object, or None (counted as skipped unless the line is blank).

        A `bytearray` is emptied once decoded: a line of megabytes is not held while it is parsed.
        """
        try:
            text = line.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # not UTF-8
            self.skipped += 1
            return None
        if isinstance(line, bytearray):
            line.clear()
        try:
            record = _decode(text)
        except (ValueError, RecursionError):  # not JSON, or nested too deep
            if text.strip(_BLANK):
                self.skipped += 1
            return None
        if type(record) is dict:
            return record
        self.skipped += 1
        return None


def _held(rest: bytes, limit: int) -> tuple[bytearray, int]:
    """What to keep of a line's start (and how much of it is passed over when it is already too long)."""
    return (bytearray(), len(rest)) if len(rest) > limit else (bytearray(rest), 0)


class JsonDocument(JsonLines):
    """A file whose whole content, from its current position, is one JSON object (Gemini CLI's files up to v0.38).

    The agent rewrites such a file whole, so it is read whole every time: one record, or a skipped
    count of one when the content is not a JSON object (cut short, garbage, or over `limit` bytes,
    which are passed over unread and counted `oversized`). A blank file holds nothing yet.
    """

    def __iter__(self) -> Iterator[dict[str, JsonValue]]:
        if self._cancel is not None and self._cancel.is_set():
            raise ReadCancelled
        data = self._file.read(self._limit + 1)
        if len(data) > self._limit:
            while block := self._file.read(_BLOCK_BYTES):
                self.consumed += len(block)
            self.consumed += len(data)
            self.skipped += 1
            self.oversized += 1
            return
        self.consumed = len(data)
        record = self._record(data)
        if record is not None:
            yield record
