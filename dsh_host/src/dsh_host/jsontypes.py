"""The toolkit's JSON vocabulary: `JsonValue`, `Json` and `MaybeAwaitable` (a leaf: imports nothing of dsh).

Every layer types JSON with these names, so they live below all of them; `dsh_host.hookspecs`
re-exports them, and plugins import them from there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, TypeAlias, TypeVar

T = TypeVar("T")

MaybeAwaitable: TypeAlias = T | Awaitable[T]
"""A hook result given directly or as an awaitable the agent resolves."""

JsonValue: TypeAlias = Any
"""Any JSON value: null, a boolean, a number, a string, a list or an object of JSON values.

The one place the toolkit's types say "arbitrary data": event data, model messages and content
blocks are read by their shape, so a type checker lets them through as `Any`."""

Json: TypeAlias = Mapping[str, JsonValue]
"""A JSON object in the log's vocabulary (camelCase keys), frozen when it comes from the log."""
