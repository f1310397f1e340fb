"""An incremental Server-Sent Events parser (the WHATWG `text/event-stream` format).

Network reads cut the stream anywhere: inside a line, inside a UTF-8 sequence, or between the
CR and LF of a line break. `SSEParser.feed` takes whatever bytes arrived and returns the events
they completed; the rest waits for the next read.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

DONE = "[DONE]"
"""The data OpenAI-compatible servers send as their last event."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its data lines joined with newlines."""

    data: str
    event: str = "message"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data == DONE


class SSEParser:
    """Turns a byte stream into events; an event is dispatched by the blank line that ends it.

    An event still open when the stream ends is discarded, as the standard says: a connection
    that drops mid-event must not deliver half an event.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._after_cr = False  # the last break seen was a lone CR, so a leading LF belongs to it
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Parse the next bytes of the stream; returns the events they completed, in order."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = False
        lines = _LINE_BREAK.split(self._buffer + text)
        self._buffer = lines.pop()
        if not self._buffer and text.endswith("\r"):
            self._after_cr = True
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: servers send them as keep-alives
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return ServerSentEvent(data="\n".join(data), event=event or "message", id=self._last_id)
