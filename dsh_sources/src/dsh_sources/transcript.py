"""What a source reads out of an agent's file, and what each agent's format provides.

A file is read once and then only where it grew. Each agent's module implements
`TranscriptFormat`: where its files are, and a `Projector` that turns the records of a file
into dsh's view of its session. A projector starts either empty (the file is read from its
first byte) or from the state it left in the index after the last read, with `Stored` giving
access to what the index holds of the file; it sees only the new records and says what changed
as an `Update`: the session's facts, how many of the stored messages stay (`keep`) and the
messages after them (`tail`). When new records cannot be projected from the state (a record that
rewrites history the state does not describe) it raises `Reread`, and the file is read again
from its start, so the result is always what a read of the whole file gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Protocol

from dsh_host.sources import SourceMessage
from dsh_host.text import shorten_text
from dsh_sources.spill import NodeSpill

if TYPE_CHECKING:
    import threading

    from dsh_host.hookspecs import Json, JsonValue
    from dsh_sources.lines import JsonLines

TITLE_CHARS = 80
"""A title made from a prompt is its first line's words, shortened to this many characters."""


@dataclass(frozen=True, slots=True)
class Said:
    """A message of a session's current conversation as the index keeps it.

    `stream` ties the records of one reply streamed as several (Claude Code's `message.id`), so
    a reply continued in the file's next bytes joins the message instead of starting one.
    """

    message: SourceMessage
    stream: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """A record of a file that others point at by its key (Claude Code's `uuid`).

    `parent` is the key it points at; `says` whether it holds a message; `at` its place on the
    current conversation's chain (None when off it), and, when on it, `msgs` the number of
    messages through it and `blocks` the number of text blocks of the last of them.
    """

    key: str
    parent: str | None
    says: bool
    at: int | None = None
    msgs: int = 0
    blocks: int = 0


@dataclass(frozen=True)
class Facts:
    """What a listing shows of a session: the agent's id for it, cwd, times, title and message count."""

    agent_id: str
    cwd: str | None
    created_at: int
    updated_at: int
    title: str | None
    messages: int


@dataclass(frozen=True)
class Update:
    """What reading a file's new records changed.

    `facts` is None when the file holds no session. The session's messages become the first
    `keep` stored ones followed by `tail`. `cut`, when not None, takes every node placed after
    that position off the chain (-1: all of them) before `nodes` are written over what is stored
    (held in memory, or in the read's `NodeSpill` when it spilled them).
    `state` is what the projector needs to go on from here.
    """

    state: Json
    facts: Facts | None
    keep: int
    tail: tuple[Said, ...]
    cut: int | None = None
    nodes: tuple[Node, ...] | NodeSpill = ()


class Reread(Exception):
    """The new records cannot be projected from the stored state: read the file from its start."""


class Stored(Protocol):
    """What the index holds of the file a projector continues."""

    keeps_nodes: bool
    """Whether the index keeps the nodes of this read (when not, a projector may leave them out)."""

    def nodes(self, keys: Sequence[str]) -> dict[str, Node]:
        """The stored nodes among `keys`, by key."""
        ...

    def said(self, position: int) -> Said:
        """The stored message at `position`."""
        ...

    def messages(self, start: int, stop: int) -> list[Said]:
        """The stored messages from `start` up to (not including) `stop`."""
        ...

    def turn_starts(self, before: int, limit: int) -> list[int]:
        """The positions of the last `limit` typed prompts before `before`, newest first."""
        ...

    def spill(self) -> NodeSpill | None:
        """Where a read from the file's start may keep its nodes instead of memory (None: keep them in memory).

        The same spill on every call of one read; it is the projector's to fill and hand on in `Update.nodes`.
        """
        ...


class Projector(Protocol):
    """One read of a file's new records."""

    def feed(self, record: dict[str, JsonValue]) -> None:
        """Take the next record (a JSON object line)."""
        ...

    def finish(self) -> Update:
        """What the records fed change (`Reread` when the state cannot carry them)."""
        ...


class AgentFormat(Protocol):
    """What a source asks of any agent's format: its provider name, where a session is, its outside titles."""

    provider: str
    """The agent, as the provenance `provider` of its assistant messages."""

    def locate(self, agent_id: str) -> list[str]:
        """The files that may hold the session the agent calls `agent_id` (without listing them all)."""
        ...

    def titles(self) -> Mapping[str, str]:
        """Titles the agent keeps outside its session files, by its own session id."""
        ...


class TranscriptFormat(AgentFormat, Protocol):
    """One agent's session files, one session a file: where they are and how their records are projected."""

    def files(self) -> Iterator[str]:
        """Every file that may hold a session (a missing folder holds none)."""
        ...

    def records(self, path: str) -> type[JsonLines]:
        """How `path` holds its records: `JsonLines` (a record a line), or `JsonDocument` (one whole object)."""
        ...

    def projector(self, path: str, state: Json | None, stored: Stored) -> Projector:
        """A projector of `path`'s records, going on from `state` (None: from the first byte)."""
        ...


@dataclass(frozen=True)
class SessionRead:
    """A session of a store read again: its agent id, its mark (see `StoreRead`), its facts, its current
    messages, and how many of its records were left out (rows that are no JSON object)."""

    agent_id: str
    mark: str
    facts: Facts
    messages: tuple[Said, ...]
    skipped: int = 0


SessionSink = Callable[[SessionRead], None]
"""Where a store's read hands each session it read again, as it reads them (the index writes them as they come)."""

WHOLE = (0, 1)
"""The share of a store's read that is all of it (see `StoreFormat.read`)."""


def deal(weights: Sequence[tuple[str, int]], share: tuple[int, int]) -> set[str]:
    """The keys that fall to `share` (k of n): the heaviest first, each to the share holding the least so
    far (a tie to the lowest), so that n readers seeing the same weights split them evenly, each once."""
    k, n = share
    if n == 1:
        return {key for key, _ in weights}
    loads = [0] * n
    mine: set[str] = set()
    for key, weight in sorted(weights, key=lambda item: (-item[1], item[0])):
        lightest = loads.index(min(loads))
        loads[lightest] += max(1, weight)
        if lightest == k:
            mine.add(key)
    return mine


@dataclass(frozen=True)
class StoreRead:
    """What reading a store (one file or folder holding many sessions, such as a database) found.

    `signature` is how the store looked when read (None: it has none that is cheap to take, and
    every check reads its marks). `marks` holds a mark of every session it holds now, by agent
    id: a session whose mark did not move since the last read was not read again (those that
    were went to the read's `SessionSink`); a session of the last read that is not in `marks` is
    gone. `skipped` counts the records that belong to no session (a session row that is no
    session), counted at every read. `problem`, when set, says why the store could not be read: the
    sessions it handed over before it met the problem are written, every other one stays as it was.
    """

    path: str
    signature: tuple[int, ...] | None
    marks: dict[str, str]
    skipped: int = 0
    problem: str | None = None


class StoreFormat(AgentFormat, Protocol):
    """One agent's stores, each holding many sessions (OpenCode's database, its older folder of JSON files)."""

    def stores(self) -> Iterator[str]:
        """Every store there is now (a missing folder holds none)."""
        ...

    def signature(self, path: str) -> tuple[int, ...] | None:
        """How the store looks now, cheaply (sizes, times): an unchanged signature needs no read; None: always read."""
        ...

    def read(
        self,
        path: str,
        marks: Mapping[str, str],
        sink: SessionSink,
        cancel: threading.Event | None = None,
        share: tuple[int, int] = WHOLE,
    ) -> StoreRead:
        """Read the store: every session's mark, and each session whose mark is not the one in `marks`,
        handed to `sink` as soon as it is read (a store's sessions are never all held at once).

        With `share` (k, n), only the sessions `deal` gives the k-th of n shares are read again (by
        their size), so n processes may read one store together; each returns every mark, and reads
        that return the same marks saw the same sessions to read and read each once between them.
        A read that starts over (a database that changed under it) hands its sessions over again.
        Never raises for what is in the store: a store that cannot be read is a `StoreRead` with a
        `problem`. `cancel`, checked between messages, stops the read with `lines.ReadCancelled`.
        """
        ...

    def rank(self, path: str) -> int:
        """Of two stores holding one session, the one of higher rank serves it (then the one active last)."""
        ...


@dataclass(frozen=True)
class Transcript:
    """A whole file projected at once: its session's facts and messages, and the lines it skipped."""

    agent_id: str
    cwd: str | None
    created_at: int
    updated_at: int
    title: str | None
    messages: tuple[SourceMessage, ...]
    skipped: int = 0
    oversized: int = 0


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
_DAYS: dict[str, int | None] = {}
"""Milliseconds at midnight UTC of each date seen in a canonical timestamp (None: not a date)."""
_minute: tuple[str, bool, int | None] = ("", False, None)
"""The minute the last canonical timestamp fell in (`YYYY-MM-DDTHH:MM:`): whether it has the canonical
form, and its milliseconds (None: not a time). A transcript's records come seconds apart."""


def _minute_ms(head: str) -> tuple[str, bool, int | None]:
    hours, minutes = head[11:13], head[14:16]
    if not (head.isascii() and (hours + minutes).isdigit()):
        return head, False, None
    day = _day(head[:10])
    if day is None or int(hours) > 23 or int(minutes) > 59:
        return head, True, None
    return head, True, day + (int(hours) * 60 + int(minutes)) * 60_000


def iso_ms(value: JsonValue) -> int | None:
    """An ISO 8601 timestamp (`2025-01-02T03:04:05.678Z`) in milliseconds, or None.

    The form the agents write (UTC, milliseconds, `Z`) is read without a datetime per call, and
    its minute is worked out once for the records that fall in it: a transcript holds a
    timestamp per record.
    """
    global _minute
    if not isinstance(value, str) or not value:
        return None
    if (
        len(value) == 24
        and value[23] == "Z"
        and value[19] == "."
        and value[16] == value[13] == ":"
        and value[10] == "T"
    ):
        minute = _minute
        if minute[0] != value[:17]:
            minute = _minute = _minute_ms(value[:17])
        clock = value[17:19] + value[20:23]  # SSmmm
        if minute[1] and clock.isascii() and clock.isdigit():
            start = minute[2]
            number = int(clock)
            return None if start is None or number >= 60_000 else max(0, start + number)
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0, (moment - _EPOCH) // _MS)


_CANONICAL = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z", re.ASCII).fullmatch
"""The form the agents write, with every field in its range but the day of the month (see `_DAYS`); ASCII
digits only, as `iso_ms` reads them (another script's digits sort after them and are no time)."""


class LatestTime:
    """The latest of many timestamps (`iso_ms` of each), worked out at the end instead of for each one.

    Timestamps of the form the agents write (UTC, milliseconds, `Z`) sort as their strings do, so
    one of them only needs checking, not working out, and only when it sorts after the latest so
    far; a timestamp of any other form is worked out as it comes. (Codex stamps every record, and
    a session's latest activity is the latest of them.)
    """

    __slots__ = ("_form", "_other")

    def __init__(self, start: int | None = None) -> None:
        self._form = ""
        self._other = start

    def see(self, value: JsonValue) -> None:
        if type(value) is str and len(value) == 24 and _CANONICAL(value) is not None:
            # The day is checked (April 31st is no day) only when it is not the latest's: a call
            # per record would cost a fifth of this, which runs for every record of gigabytes.
            form = self._form
            if value > form and (value[:10] == form[:10] or _day(value[:10]) is not None):
                self._form = value
            return
        time = iso_ms(value)
        if time is not None and (self._other is None or time > self._other):
            self._other = time

    def ms(self) -> int | None:
        """The latest timestamp seen in milliseconds (with the start), None when none was a time."""
        return max((time for time in (iso_ms(self._form), self._other) if time is not None), default=None)


def _day(date: str) -> int | None:
    """Milliseconds at midnight UTC of a `YYYY-MM-DD` date (None: no such day), each date worked out once."""
    day = _DAYS.get(date, -1)
    if day == -1:
        day = _DAYS[date] = _day_ms(date)
    return day


def _day_ms(date: str) -> int | None:
    try:
        moment = datetime.fromisoformat(date + "T00:00:00+00:00")
    except ValueError:
        return None
    return (moment - _EPOCH) // _MS


def prompt_title(text: str) -> str | None:
    """A title made from a prompt: its words on one line, shortened; None for a blank prompt."""
    title = shorten_text(text, TITLE_CHARS)
    return title or None


def one_line(title: str | None) -> str | None:
    """A title with its whitespace runs made single spaces (None stays None, blank becomes None)."""
    return " ".join(title.split()) or None if title else None


def absolute_cwd(value: JsonValue) -> str | None:
    """A cwd as a dsh header keeps it (an absolute POSIX path), or None."""
    return value if isinstance(value, str) and value.startswith("/") else None
