"""Wording for the notices callers put beside retained output.

The retainers never write a notice into what they keep; callers place one and reserve room
for it themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .results import Omitted

Unit = Literal["items", "bytes", "chars", "lines"]
Strategy = Literal["head", "tail", "headTail"]

_UNITS = ("items", "bytes", "chars", "lines")


@dataclass(frozen=True)
class HeadTailLimit:
    """The budget of a head+tail retention, in the notice's unit."""

    head: int
    tail: int


@dataclass(frozen=True)
class RetentionNotice:
    """What a caller retained, for building the notice shown next to it.

    `scope` names what was retained (free text chosen by the caller), `limit` is the budget
    (a `HeadTailLimit` for head+tail retention), and `kept` how many units were kept.
    """

    scope: str
    strategy: Strategy
    unit: Unit
    limit: int | HeadTailLimit
    kept: int
    omitted: Omitted


def describe_omitted(omitted: Omitted, unit: Unit) -> str:
    """One sentence saying how many `unit` were omitted, or `""` when nothing was."""
    if unit not in _UNITS:
        raise ValueError(f"unit must be one of {', '.join(_UNITS)}, not {unit!r}")
    if omitted.kind == "exact":
        return f"Omitted {omitted.count} {unit}."
    if omitted.kind == "unknown":
        return f"More {unit} were omitted."
    return ""


def format_retention_notice(notice: RetentionNotice, recovery: Callable[[RetentionNotice], str]) -> str:
    """The omission sentence followed by the caller's recovery hint, skipping empty parts.

    `recovery` tells the reader how to get at what was left out (narrow a search, read a
    stored file, ...); it receives the notice so it can quote the limits.
    """
    parts = (describe_omitted(notice.omitted, notice.unit), recovery(notice))
    return " ".join(part for part in parts if part)
