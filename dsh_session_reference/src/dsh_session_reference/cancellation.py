"""Racing work against a cancel signal (an `asyncio.Event`, optionally carrying `.reason`)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from dsh_host.asyncs import abandon_on
from dsh_session_reference.errors import ErrorCode, SessionReferenceError

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

CANCELLED_MESSAGE = "session reference preparation was cancelled"


def cancelled(signal: asyncio.Event | None) -> SessionReferenceError:
    return SessionReferenceError(ErrorCode.CANCELLED, CANCELLED_MESSAGE, getattr(signal, "reason", None))


def is_set(signal: asyncio.Event | None) -> bool:
    return signal is not None and signal.is_set()


async def race(work: Awaitable[T], signal: asyncio.Event | None) -> T:
    """Await `work`, or raise CANCELLED as soon as `signal` is set (the work is abandoned)."""
    return await abandon_on(signal, work, lambda: cancelled(signal))
