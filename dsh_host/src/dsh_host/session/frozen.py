"""Read-only JSON containers.

`FrozenDict` and `FrozenList` subclass `dict` and `list`, so they compare equal to plain JSON
values and serialise with `json.dumps` unchanged, but every mutating method raises TypeError.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue


def _readonly(*_: object, **__: object) -> NoReturn:
    raise TypeError("session data is frozen")


class FrozenDict(dict):
    """A dict that cannot be changed after construction."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly
    __ior__ = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenDict:
        return self


class FrozenList(list):
    """A list that cannot be changed after construction."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _readonly
    clear = sort = reverse = __iadd__ = __imul__ = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenList:
        return self


def _frozen_object(pairs: list[tuple[str, JsonValue]]) -> FrozenDict:
    frozen = FrozenDict(pairs)
    if list in map(type, frozen.values()):  # C-speed test; most objects hold no array
        return FrozenDict([(k, _freeze_lists(v)) if type(v) is list else (k, v) for k, v in pairs])
    return frozen


def _freeze_lists(value: list) -> FrozenList:
    # Objects inside arrays are already frozen by the object hook; only nested arrays remain.
    # Iterative, so nesting is limited by the JSON codec only: collect the nested arrays
    # parents first, then freeze them children first (parsed arrays are never shared).
    order = [value]
    index = 0
    while index < len(order):
        order.extend(v for v in order[index] if type(v) is list)
        index += 1
    if len(order) == 1:
        return FrozenList(value)
    frozen: dict[int, FrozenList] = {}
    for item in reversed(order):
        frozen[id(item)] = FrozenList([frozen[id(v)] if type(v) is list else v for v in item])
    return frozen[id(value)]


_decoder = json.JSONDecoder(object_pairs_hook=_frozen_object)  # built once, not per call
_decode, _raw_decode = _decoder.decode, _decoder.raw_decode


def frozen_loads(text: str) -> JsonValue:
    """Parse JSON text into frozen containers."""
    value = _decode(text)
    return _freeze_lists(value) if type(value) is list else value


def frozen_loads_compact(text: str) -> JsonValue:
    """`frozen_loads` of text this process encoded compactly (no surrounding whitespace)."""
    value, end = _raw_decode(text)  # skips `decode`'s whitespace handling, which compact text lacks
    if end != len(text):  # pragma: no cover - not compact encoder output
        return frozen_loads(text)
    return _freeze_lists(value) if type(value) is list else value


def thaw(value: JsonValue) -> JsonValue:
    """A detached, mutable deep copy of a (possibly frozen) JSON value."""
    if isinstance(value, (dict, list)):
        # The C codec copies without Python recursion (and faster than a Python walk).
        return json.loads(json.dumps(value, allow_nan=False))
    return value
