"""What a sent message became: the ticket `send`/`steer` return and the turn result it resolves to.

A ticket travels inside the frozen inbox record, so it follows the message through queueing,
steering and re-queueing: whichever turn writes the message consumes the ticket, and the ticket
resolves when that turn's `turn/end` is logged. A message dropped before any turn took it (a
cancel, a disposal, a terminal stop discarding steering) resolves its ticket as `dropped` at
once. A transport therefore never guesses from later events which turn answered a message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from dsh_host.jsontypes import Json  # imported at run time for typing.get_type_hints

if TYPE_CHECKING:
    from dsh_host.session.session import Session

DROPPED = "dropped"
"""The `TurnResult.reason` of a message no turn consumed."""


@dataclass(frozen=True)
class TurnResult:
    """How the turn that consumed a message ended.

    `turn` is that turn's number (None when the message was dropped before any turn took it);
    `reason` is the kind of the turn's `turn/end` reason (`completed`, `max-tokens`, `aborted`,
    `disposed`, `interrupted`, `rejected`, `error`), or `dropped`; `end` is the whole reason
    mapping as logged (empty when dropped); `text` is the text of the turn's last assistant
    message (empty when there was none).
    """

    session_id: str
    turn: int | None
    reason: str
    text: str = ""
    end: Json = field(default_factory=lambda: MappingProxyType({}))

    @property
    def ok(self) -> bool:
        """True when the turn completed (or stopped at the token limit)."""
        return self.reason in ("completed", "max-tokens")


class Ticket:
    """The receipt of one queued or steering message (returned by `Agent.send` and `Agent.steer`).

    `turn` is the number of the turn that consumed the message, once one has (None before,
    and for a dropped message). `await ticket.result()` returns the `TurnResult` once that
    turn has ended, or a `dropped` result.
    """

    __slots__ = ("_future", "_session_id", "_turn", "steering")

    def __init__(self, session_id: str, *, steering: bool) -> None:
        self._session_id = session_id
        self._turn: int | None = None
        self._future: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()
        self.steering = steering
        """True when the message went in as steering of a running turn."""

    @property
    def turn(self) -> int | None:
        """The number of the turn that consumed the message; None before that and when dropped."""
        return self._turn

    def done(self) -> bool:
        """True once the ticket has resolved (its turn ended, or the message was dropped)."""
        return self._future.done()

    async def result(self) -> TurnResult:
        """The result of the turn that consumed the message (waits for it to end)."""
        return await asyncio.shield(self._future)

    def add_done_callback(self, callback: Callable[[TurnResult], None]) -> None:
        """Call `callback(result)` when the ticket resolves (at once if it has)."""
        self._future.add_done_callback(lambda future: callback(future.result()))

    # The agent's side.

    def consumed_by(self, turn: int) -> None:
        """Record that `turn` wrote the message (the last turn to do so owns the ticket)."""
        if not self._future.done():
            self._turn = turn

    def finish(self, result: TurnResult) -> None:
        """Resolve with `result`, unless already resolved (the first result wins)."""
        if not self._future.done():
            self._future.set_result(result)

    def drop(self) -> None:
        """Resolve as dropped, unless a turn already consumed the message."""
        if self._turn is None:
            self.finish(TurnResult(self._session_id, None, DROPPED))


def turn_result(session: Session, turn: int, first_seq: int, reason: Json) -> TurnResult:
    """The result of turn `turn`, whose events start at `first_seq`: its end and last answer."""
    text = ""
    for seq in range(session.seq - 1, first_seq - 1, -1):
        event = session.event(seq)
        if event.type == "assistant/message":
            text = "".join(block["text"] for block in event.data["content"] if block.get("type") == "text")
            break
    return TurnResult(session.id, turn, reason["kind"], text, reason)
