"""JSON text byte-identical to JavaScript's ``JSON.stringify`` (no whitespace).

URIs and prompts are compared byte for byte with the TypeScript reference, so Python's
``json.dumps`` is not enough on its own: it prints floats differently (``1.0``, ``1e-07``),
keeps dict keys in insertion order where a JS object lists integer-like keys first, and emits
lone surrogates raw where JS escapes them. ``json.dumps`` is still used whenever its output is
already identical, which is the common case (strings, ints, lists and dicts of those).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from dsh_host.text import escape_lone_surrogates

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

NOT_SERIALIZABLE_MESSAGE = "session-reference data is not JSON-serializable"

# Array-index keys (canonical decimal integers up to 2**32 - 2) come first in a JS object's
# own-key order, ascending, before all other keys in insertion order.
_MAX_ARRAY_INDEX = 2**32 - 2


def js_stringify(value: JsonValue, *, plain: bool = False) -> str:
    """Serialize ``value`` exactly as ``JSON.stringify(value)`` would in JavaScript.

    Accepts ``None``, ``bool``, ``int``, ``float``, ``str``, ``list``, ``tuple`` and ``dict``
    with ``str`` keys. Non-finite floats become ``null`` as in JS. Anything else, and cyclic
    containers, raise ``TypeError("session-reference data is not JSON-serializable")``.

    ``plain=True`` skips the walk that looks for floats and array-index keys: for values the
    caller built itself from strings, integers and fixed keys (the snapshot's own objects).
    """
    if not plain and _needs_js_path(value, set()):
        text = _encode(value)
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # JSON.stringify works on UTF-16 code units: it prints a surrogate pair as the character it
    # encodes and escapes any other surrogate.
    return escape_lone_surrogates(text)


def tag_safe_json(value: JsonValue, *, plain: bool = False) -> str:
    """``js_stringify(value)`` with every ``<`` written as ``\\u003c``.

    The result parses back to the same value, yet no string inside it can spell a markup tag
    such as ``</referenced-sessions>``. ``plain`` is as for `js_stringify`.
    """
    return js_stringify(value, plain=plain).replace("<", "\\u003c")


def js_number(number: float) -> str:
    """Format a float as JavaScript's ``Number.prototype.toString()`` does (NaN/inf: ``null``)."""
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr() yields the shortest round-tripping digits, the same digits JS picks; only the
    # placement of the decimal point and the exponent style differ.
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = point - 1
    power_text = f"e+{power}" if power >= 0 else f"e-{-power}"
    if count == 1:
        return sign + digits + power_text
    return sign + digits[0] + "." + digits[1:] + power_text


def _needs_js_path(value: JsonValue, ancestors: set[int]) -> bool:
    """Validate ``value`` and tell whether ``json.dumps`` would print it differently from JS."""
    if value is None or isinstance(value, (str, bool, int)):
        return False
    if isinstance(value, float):
        return True
    if not isinstance(value, (list, tuple, dict)) or id(value) in ancestors:
        raise TypeError(NOT_SERIALIZABLE_MESSAGE)
    ancestors.add(id(value))
    needs = False
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(NOT_SERIALIZABLE_MESSAGE)
            # Evaluate the child first so every nested value is validated.
            needs = _needs_js_path(item, ancestors) or needs or _is_array_index(key)
    else:
        for item in value:
            needs = _needs_js_path(item, ancestors) or needs
    ancestors.discard(id(value))
    return needs


def _encode(value: JsonValue) -> str:
    """The JS-exact encoder for values already validated by ``_needs_js_path``."""
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, dict):
        members = (json.dumps(key, ensure_ascii=False) + ":" + _encode(value[key]) for key in _js_key_order(value))
        return "{" + ",".join(members) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_encode(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _js_key_order(mapping: dict[str, JsonValue]) -> list[str]:
    indices = sorted((key for key in mapping if _is_array_index(key)), key=int)
    if not indices:
        return list(mapping)
    return indices + [key for key in mapping if not _is_array_index(key)]


def _is_array_index(key: str) -> bool:
    return (
        0 < len(key) <= 10
        and key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_ARRAY_INDEX
    )
