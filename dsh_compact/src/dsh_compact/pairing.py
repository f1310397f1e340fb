"""Tool-pairing balance: where the surface can be cut without splitting a call from its result.

A cut is a gap between surface positions; a surface of N nodes has N+1 cuts, cut `i` lying just
before node `i`. Folding the surface in order, an `assistant/message` opens one pair per
`tool-call` block and a `tool/result` closes one; a cut is balanced when no pair is open there.
The balance counts pairs rather than matching call ids, as the reference does.
"""

from __future__ import annotations

from dsh_host import DshError, Event, Session


class ToolPairingError(DshError, ValueError):
    """The surface (or the seq asked about) does not allow a balance answer."""


def balanced_cuts(session: Session) -> list[bool]:
    """`balanced[i]` for every cut `i` of the current surface (`len(nodes) + 1` entries)."""
    balanced = [True]
    open_pairs = 0
    for seq in session.surface.nodes:
        event = _surface_event(session, seq)
        if event.type == "assistant/message":
            open_pairs += sum(1 for block in event.data.get("content") or () if block.get("type") == "tool-call")
        elif event.type == "tool/result":
            open_pairs -= 1
            if open_pairs < 0:
                raise ToolPairingError(
                    f"tool-pairing balance: tool/result at surface seq {seq} has no matching tool-call "
                    "(corrupt surface)"
                )
        balanced.append(open_pairs == 0)
    return balanced


def balanced_before(session: Session, seq: int) -> bool:
    """Whether the cut just before surface node `seq` is balanced."""
    position = _position(session, seq)
    return balanced_cuts(session)[position]


def balanced_after(session: Session, seq: int) -> bool:
    """Whether the cut just after surface node `seq` is balanced."""
    position = _position(session, seq)
    return balanced_cuts(session)[position + 1]


def _position(session: Session, seq: int) -> int:
    try:
        return session.surface.nodes.index(seq)
    except ValueError:
        raise ToolPairingError(f"tool-pairing balance: surface seq {seq} not found") from None


def _surface_event(session: Session, seq: int) -> Event:
    try:
        event = session.event(seq)
    except IndexError:
        event = None
    if event is None or event.seq != seq:
        raise ToolPairingError(
            f"tool-pairing balance: surface seq {seq} has no matching session event (corrupt surface)"
        )
    return event
