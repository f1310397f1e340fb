"""The values the retainers report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

OmittedKind = Literal["none", "exact", "unknown"]


@dataclass(frozen=True)
class Omitted:
    """How much was left out: nothing, an exact count, or an unknown amount.

    The retainers only ever report `none` or `exact`; `unknown` exists for callers whose
    upstream source could not count what it dropped.
    """

    kind: OmittedKind
    count: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("none", "exact", "unknown"):
            raise ValueError(f"unknown omission kind {self.kind!r}")
        if self.kind == "exact":
            if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
                raise ValueError(f"an exact omission needs a non-negative int count, not {self.count!r}")
        elif self.count != 0:
            raise ValueError(f"a {self.kind!r} omission carries no count")

    @classmethod
    def none(cls) -> Omitted:
        """Nothing was omitted."""
        return cls("none")

    @classmethod
    def exact(cls, count: int) -> Omitted:
        """Exactly `count` units were omitted."""
        return cls("exact", count)

    @classmethod
    def unknown(cls) -> Omitted:
        """Something was omitted, but how much is not known."""
        return cls("unknown")


@dataclass(frozen=True)
class PushDecision:
    """What one push did.

    `kept` means this push lost nothing to the budget; `truncated` is cumulative and means
    something has been omitted so far.
    """

    kept: bool
    truncated: bool


@dataclass(frozen=True)
class RetainedText:
    """The retained text and the exact number of UTF-8 bytes left out of it."""

    text: str
    truncated: bool
    omitted: Omitted


@dataclass(frozen=True)
class RetainedItems(Generic[T]):
    """The retained items, how many were seen and kept, and how many were left out."""

    items: tuple[T, ...]
    truncated: bool
    seen: int
    kept: int
    omitted: Omitted
