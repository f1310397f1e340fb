"""Lossless JSON: values that survive a JSON round trip unchanged.

Accepted: None, bool, str, int, finite float other than -0.0, list, and dict with str keys.
Rejected: NaN, infinities, -0.0, non-str keys, tuples, sets, bytes, other objects and cycles.

The check is done by the C JSON codec rather than a Python walk: serialise with
`allow_nan=False`, parse the text back, and require the copy to equal the input. Equality
catches tuples (a tuple never equals a list), non-str keys (coerced to strings by the
encoder) and other objects; the encoder itself rejects NaN, infinities and cycles. Only -0.0
compares equal to 0.0, so it is searched for explicitly when the text could contain it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from dsh_host.errors import DshError


def _encoder() -> Any:
    """Compact, non-ASCII-escaping, NaN-refusing JSON encoding, built once.

    `JSONEncoder.encode` builds a new C encoder on every call, which costs as much as encoding
    a small event. The C encoder is built here once, without a circular-reference table: a
    cycle then ends in RecursionError, which `canonical_text` reports as a cycle anyway.
    """
    slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - interpreters without the C accelerator
        return slow.encode
    encode = make(None, slow.default, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    join = "".join

    def dumps(value: Any) -> str:
        if isinstance(value, str):
            return json.encoder.encode_basestring(value)
        return join(encode(value, 0))

    return dumps


_dumps = _encoder()
# The C scanner directly: `json.loads` adds Python-level dispatch that costs as much as
# scanning a small event.
_scan = json.JSONDecoder().scan_once


class NotLosslessJson(DshError, TypeError):
    """The value is not losslessly JSON-serialisable."""


def dumps(value: Any) -> str:
    """Compact JSON text of an already-validated value (UTF-8 friendly, no ASCII escaping)."""
    return _dumps(value)


def canonical_text(value: Any) -> str:
    """Validate `value` and return its compact JSON text."""
    try:
        text = _dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotLosslessJson(_first_difference(value, str(exc))) from None
    try:
        copy, end = _scan(text, 0)
    except RecursionError as exc:
        raise NotLosslessJson("value is nested too deeply") from exc
    if end != len(text):  # pragma: no cover - the compact encoder writes no trailing text
        raise NotLosslessJson("value does not survive a JSON round trip")
    if copy != value:
        raise NotLosslessJson(_first_difference(value))
    if "-0" in text and _has_negative_zero(copy):
        raise NotLosslessJson(_first_difference(value, "-0.0 is not lossless JSON"))
    return text


def _has_negative_zero(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if item == 0.0 and math.copysign(1.0, item) < 0:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_EXIT = object()


def _first_difference(value: Any, fallback: str = "value does not survive a JSON round trip") -> str:
    """Describe where `value` stops being JSON, as `path: reason` (depth first, in order)."""
    stack: list[tuple[str, Any]] = [("$", value)]
    ancestors: set[int] = set()
    while stack:
        path, item = stack.pop()
        if path is _EXIT:
            ancestors.discard(item)
            continue
        if item is None or isinstance(item, (bool, str, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{path}: {item!r} is not finite"
            if item == 0.0 and math.copysign(1.0, item) < 0:
                return f"{path}: -0.0 is not lossless JSON"
            continue
        if not isinstance(item, (dict, list)):
            return f"{path}: {type(item).__name__} is not a JSON value"
        if id(item) in ancestors:
            return f"{path}: cycle (the value contains itself)"
        ancestors.add(id(item))
        stack.append((_EXIT, id(item)))  # type: ignore[arg-type]
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    return f"{path}: key {key!r} is not a string"
            stack.extend((f"{path}.{key}", child) for key, child in reversed(item.items()))
        else:
            stack.extend((f"{path}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return f"$: {fallback}"
