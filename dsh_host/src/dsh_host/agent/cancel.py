"""The turn's cancellation signal and how an interrupted turn is classified."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dsh_host.session.frozen import FrozenDict

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json

USER_CAUSE = FrozenDict(kind="user")
DISPOSED = FrozenDict(kind="disposed")


def resolve_cause(cause: Json | None) -> FrozenDict:
    """A fresh frozen `{kind}` for a cancel cause: `{kind: 'user'}` unless a kind is given.

    Only the kind is kept, so the caller mutating its object later changes nothing.
    """
    kind = cause.get("kind") if isinstance(cause, Mapping) else None
    return FrozenDict(kind=kind) if isinstance(kind, str) and kind else USER_CAUSE


class CancelSignal(asyncio.Event):
    """A turn's abort signal: an `asyncio.Event` that is set once, with the reason of the first abort.

    Adapters and tools receive it as a plain event (`is_set()`, `await wait()`); the agent aborts
    it with `abort(reason)`. The reason is `{kind: 'user' | 'parent' | 'disposed'}`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._reason: FrozenDict | None = None

    @property
    def reason(self) -> FrozenDict | None:
        """The reason of the first abort, or None while the signal is not set."""
        return self._reason

    def abort(self, reason: FrozenDict) -> None:
        """Set the signal; the first reason wins."""
        if self._reason is None:
            self._reason = reason
            self.set()


def interruption_reason(disposed: bool) -> dict[str, str]:
    """The durable turn-end reason of an interrupted turn: disposal always wins over a cancel."""
    return {"kind": "disposed"} if disposed else {"kind": "aborted"}
