"""Racing work against a cancel signal (an `asyncio.Event`, optionally carrying `.reason`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from dsh_session_reference.errors import ErrorCode, SessionReferenceError

T = TypeVar("T")

CANCELLED_MESSAGE = "session reference preparation was cancelled"


def cancelled(signal: Any) -> SessionReferenceError:
    return SessionReferenceError(ErrorCode.CANCELLED, CANCELLED_MESSAGE, getattr(signal, "reason", None))


def is_set(signal: Any) -> bool:
    return signal is not None and signal.is_set()


async def race(work: Awaitable[T], signal: Any) -> T:
    """Await `work`, or raise CANCELLED as soon as `signal` is set.

    The abandoned work keeps running (a store read in a thread cannot be interrupted); its late
    result or error is consumed quietly.
    """
    future = asyncio.ensure_future(work)
    if signal is None:
        return await future
    if signal.is_set():
        _abandon(future)
        raise cancelled(signal)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({future, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        # The caller itself was cancelled: the work is abandoned, not cancelled, either way.
        _abandon(future)
        raise
    finally:
        waiter.cancel()
    if future.done():
        return future.result()
    _abandon(future)
    raise cancelled(signal)


def _abandon(future: asyncio.Future[Any]) -> None:
    future.add_done_callback(_consume)


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
