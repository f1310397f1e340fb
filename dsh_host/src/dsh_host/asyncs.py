"""Helpers for hooks that may return awaitables."""

from __future__ import annotations

import inspect
from typing import Any


async def resolve(value: Any) -> Any:
    """Await `value` until it is no longer awaitable (hooks may return coroutines)."""
    while inspect.isawaitable(value):
        value = await value
    return value


async def resolve_all(values: list[Any]) -> list[Any]:
    """Resolve each result of a non-firstresult hook call, in order."""
    return [await resolve(v) for v in values]
