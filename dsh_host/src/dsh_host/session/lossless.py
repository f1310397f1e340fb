"""Lossless JSON: values that survive a JSON round trip unchanged.

Accepted: None, bool, str, int, finite float other than -0.0, list, and dict with str keys,
nested at most `MAX_DEPTH` levels. Rejected: NaN, infinities, -0.0, non-str keys, tuples, sets,
bytes, other objects, cycles and deeper nesting.

The check is done by C codecs rather than a Python walk: serialise, parse the text back, and
require the copy to equal the input. Equality catches tuples (a tuple never equals a list),
non-str keys (coerced to strings by the encoder) and other objects; the encoders themselves
reject NaN, infinities and cycles. Only -0.0 compares equal to 0.0, so it is searched for
explicitly when the text could contain it.

Two codecs, both public APIs. orjson first: the standard library's `JSONEncoder.encode` builds
a new C encoder on every call, and with its decoder costs several times what orjson does on an
event's data (appending a turn is bound by this). The standard library's `json` whenever orjson
refuses the value (a lone surrogate, an int beyond 64 bits, more than 254 levels, a non-str key,
an unsupported type) or may spell it differently: orjson writes floats below 1e-4 in another
notation (`0.00001`, `1e-7` where `repr` gives `1e-05`, `1e-07`). So text holding `e-` or
`0.0` anywhere, strings included, takes the standard path: that covers those floats and -0.0,
and costs two substring scans where one float check per value would cost a walk. Either way
the text is exactly what `json.dumps(value, ensure_ascii=False, separators=(",", ":"))` writes.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import orjson

from dsh_host.errors import DshError

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue

MAX_DEPTH = 512
"""The deepest nesting of arrays and objects a value may have.

Python's C JSON codecs recurse once per level, and on Python 3.10 and 3.11 that recursion
counts against the interpreter's limit (1,000 frames) together with the caller's own stack.
Every value the host keeps must stay readable wherever it is read later (a worker thread, a deep
plugin hook), so the host accepts half that limit everywhere, and says so when it refuses more.
"""

_standard_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False
).encode  # without a circular-reference table a cycle ends in RecursionError, reported as a cycle
_decode = json.JSONDecoder().raw_decode
FAST_DUMPS, FAST_LOADS = orjson.dumps, orjson.loads
"""The fast codecs; see `canonical_text` for when their text is taken as it is."""


class NotLosslessJson(DshError, TypeError):
    """The value is not losslessly JSON-serialisable."""


def canonical_text(value: JsonValue) -> str:
    """Validate `value` and return its compact JSON text."""
    try:
        out = FAST_DUMPS(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return standard_text(value)
    text = out.decode()
    if "e-" in text or "0.0" in text or FAST_LOADS(out) != value:
        return standard_text(value)  # a float orjson may spell unlike `repr`, or not lossless
    return text


def standard_text(value: JsonValue) -> str:
    """`canonical_text` by the standard library's codecs alone: exact, slower, and it names what is wrong."""
    try:
        text = _standard_encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotLosslessJson(_first_difference(value, str(exc))) from None
    try:
        copy, end = _decode(text)
    except RecursionError:
        raise NotLosslessJson(_TOO_DEEP) from None
    if end != len(text):  # pragma: no cover - the compact encoder writes no trailing text
        raise NotLosslessJson("value does not survive a JSON round trip")
    if copy != value:
        raise NotLosslessJson(_first_difference(value))
    if "-0" in text and _has_negative_zero(copy):
        raise NotLosslessJson(_first_difference(value, "-0.0 is not lossless JSON"))
    # Each level takes two characters, so only long text can be too deep.
    if len(text) > 2 * MAX_DEPTH and too_deep(copy):
        raise NotLosslessJson(_TOO_DEEP)
    return text


_TOO_DEEP = f"$: nested deeper than {MAX_DEPTH} levels"


def too_deep(value: JsonValue) -> bool:
    """Whether a parsed JSON value nests arrays and objects more than `MAX_DEPTH` levels deep."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return True
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
    return False


def _has_negative_zero(value: JsonValue) -> bool:
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


def _first_difference(value: JsonValue, fallback: str = "value does not survive a JSON round trip") -> str:
    """Describe where `value` stops being JSON, as `path: reason` (depth first, in order)."""
    stack: list[tuple[str, JsonValue]] = [("$", value)]
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
        if len(ancestors) >= MAX_DEPTH:
            return _TOO_DEEP
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
