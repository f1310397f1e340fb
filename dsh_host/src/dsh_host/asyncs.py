"""Async helpers (public namespace `dsh_host.asyncs`): resolving hook results, and abandoning
work when a cancel signal is set.

Hooks may return awaitables, so a plugin that calls a hook itself resolves what comes back
with `resolve`. `abandon_on` lets a caller stop waiting for work that cannot be interrupted (a
store read on a worker thread) as soon as its cancel signal is set; `ignore_outcome` keeps an
abandoned future's late result or error from being reported as unhandled.

Importing this namespace does not load asyncio: the helpers run on an event loop, which has
loaded it, so a plugin can import them at the top of a module that mounting loads.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar, overload

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

__all__ = ["abandon_on", "ignore_outcome", "resolve"]


@overload
async def resolve(value: Awaitable[T]) -> T: ...
@overload
async def resolve(value: T) -> T: ...
async def resolve(value: object) -> object:
    """Await `value` until it is no longer awaitable (hooks may return coroutines)."""
    while inspect.isawaitable(value):
        value = await value
    return value


async def abandon_on(cancel: asyncio.Event | None, work: Awaitable[T], cancelled: Callable[[], BaseException]) -> T:
    """Await `work`, or raise `cancelled()` as soon as `cancel` (an `asyncio.Event`) is set.

    Abandoned work keeps running (a store read or a directory walk in a thread cannot be
    interrupted); its late outcome is consumed, so it is never reported as unhandled.
    """
    import asyncio

    future = asyncio.ensure_future(work)
    if cancel is None:
        return await future
    if cancel.is_set():
        ignore_outcome(future)
        raise cancelled()
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({future, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        # The caller itself was cancelled: the work is abandoned, not cancelled, either way.
        ignore_outcome(future)
        raise
    finally:
        waiter.cancel()
    if future.done():
        return future.result()
    ignore_outcome(future)
    raise cancelled()


def ignore_outcome(future: asyncio.Future[T]) -> None:
    """Consume `future`'s eventual result or error quietly (work nobody waits for any more)."""
    future.add_done_callback(_consume)


def _consume(future: asyncio.Future[T]) -> None:
    if not future.cancelled():
        future.exception()
