"""Read-side records of one observation of a session's surface (store and query share them)."""

from __future__ import annotations

from dataclasses import dataclass

from dsh_host.jsontypes import JsonValue  # imported at run time for typing.get_type_hints
from dsh_host.session.events import SessionHeader, SurfaceText


@dataclass(frozen=True)
class SurfaceSnapshot:
    """One consistent observation: header, seq of the last event of any type, surface events.

    `events` are detached copies in log form (camelCase JSON dicts), in model-history order.
    """

    header: SessionHeader
    captured_through_seq: int | None
    events: list[dict[str, JsonValue]]


@dataclass(frozen=True)
class SurfaceTexts:
    """One consistent observation of a surface as text: a `SurfaceText` per node, in order."""

    header: SessionHeader
    captured_through_seq: int | None
    texts: list[SurfaceText]


READABLE_TYPES = frozenset({"user/message", "assistant/message", "steering/message"})
"""The surface node types a person reads as the conversation (tool results and context are the log's)."""
CHECKPOINT_SOURCE = ("plugin", "compact")
"""The (kind, plugin) of the source compaction writes its checkpoint with."""


@dataclass(frozen=True)
class SurfaceEntry:
    """One message of a session's current surface as a person reads it.

    `position` increases along the surface (a page's `before` is the one to pass back); `seq` is
    the node's event in the log and `time` its time (milliseconds since the epoch). `kind` is
    `user`, `assistant`, `steering` or `checkpoint` (a compaction summary, whose `text` is the
    summary). `text` is the display text, raw: a view escapes it. `source_kind` and
    `source_plugin` are a prompt's source (`user`, or `plugin` and the plugin's name).
    """

    position: int
    seq: int
    time: int | float | None
    kind: str
    text: str
    source_kind: str | None
    source_plugin: str | None


@dataclass(frozen=True)
class SurfacePage:
    """A page of a session's surface entries, in reading order (oldest first).

    `before` is what to pass as `before` for the next older page (None: nothing is older);
    `captured_through_seq` the seq of the session's last event of any type at the read.
    `header` and `title` (its latest title's text, None without one) are the session's at the
    same read, so a view of the page needs no other read.
    """

    session_id: str
    entries: tuple[SurfaceEntry, ...]
    before: int | None
    captured_through_seq: int | None
    header: SessionHeader
    title: str | None


@dataclass(frozen=True)
class EventsPage:
    """A page of a session's full log, in seq order: events in log form (camelCase JSON dicts).

    `before_seq` is what to pass as `before_seq` for the next older page (None: nothing is older).
    """

    session_id: str
    events: tuple[dict[str, JsonValue], ...]
    before_seq: int | None
    captured_through_seq: int | None


def surface_entry(position: int, seq: int, time: int | float | None, text: SurfaceText) -> SurfaceEntry | None:
    """The entry a surface node is to a reader, or None for a node that is no message of the conversation."""
    kind, source_kind, source_plugin, body = text
    if kind not in READABLE_TYPES or not body:
        return None
    if kind == "assistant/message":
        shown = "assistant"
    elif kind == "steering/message":
        shown = "steering"
    else:
        shown = "checkpoint" if (source_kind, source_plugin) == CHECKPOINT_SOURCE else "user"
    return SurfaceEntry(position, seq, time, shown, body, source_kind, source_plugin)
