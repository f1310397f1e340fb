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
