"""Request-envelope snapshots (`request/header`): canonical form, equality, fold."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dsh_host.session.events import Event

if TYPE_CHECKING:
    from dsh_host.jsontypes import Json, JsonValue

_CONFIG_KEYS = ("provider", "model", "temperature", "maxTokens", "stop")


def canonical_header(header: Json) -> dict[str, JsonValue]:
    """Drop empty optional parts: an empty system prompt, tool list or message prefix is absent."""
    out: dict[str, JsonValue] = {"config": {k: header["config"][k] for k in _CONFIG_KEYS if k in header["config"]}}
    if header.get("system"):
        out["system"] = header["system"]
    if header.get("tools"):
        out["tools"] = header["tools"]
    if header.get("messagePrefix"):
        out["messagePrefix"] = header["messagePrefix"]
    return out


def _compact(value: JsonValue) -> str:
    # Insertion order, not sorted: a schema whose keys moved counts as a change.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def header_equals(a: Json | None, b: Json | None) -> bool:
    """Equality of two canonical headers as the loop decides whether to log a `change`."""
    if a is None or b is None:
        return a is b
    ca, cb = a["config"], b["config"]
    for key in ("provider", "model", "temperature", "maxTokens"):
        if ca.get(key) != cb.get(key) or (key in ca) != (key in cb):
            return False
    if ("stop" in ca) != ("stop" in cb) or list(ca.get("stop", [])) != list(cb.get("stop", [])):
        return False
    if a.get("system") != b.get("system"):
        return False
    if _compact(a.get("messagePrefix", [])) != _compact(b.get("messagePrefix", [])):
        return False
    tools_a, tools_b = a.get("tools", []), b.get("tools", [])
    if len(tools_a) != len(tools_b):
        return False
    return all(_compact(x) == _compact(y) for x, y in zip(tools_a, tools_b, strict=True))


def fold_request_header(events: Iterable[Event]) -> Json | None:
    """The latest `request/header` snapshot of a log, or None."""
    latest = None
    for event in events:
        if event.type == "request/header":
            latest = event.data["header"]
    return latest
