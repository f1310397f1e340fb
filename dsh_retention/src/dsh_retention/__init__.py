"""Byte-exact UTF-8 head/tail text retention.

Keeps the first and/or last N bytes of a text (or the first N items of a sequence) with an
exact count of what was left out, never splitting a code point at a cut. Byte counts follow
JavaScript's UTF-8, so results match the reference implementation.

Names are loaded on first use: a host imports this package (for its `retention` plugin) on
every command, and most never retain anything.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .items import ItemRetainer
    from .notice import HeadTailLimit, RetentionNotice, describe_omitted, format_retention_notice
    from .results import Omitted, PushDecision, RetainedItems, RetainedText
    from .text import TextRetainer, retain_head_tail
    from .utf8 import js_utf8_decode, js_utf8_encode, utf8_length

_HOMES = {
    "ItemRetainer": "items",
    "HeadTailLimit": "notice",
    "RetentionNotice": "notice",
    "describe_omitted": "notice",
    "format_retention_notice": "notice",
    "Omitted": "results",
    "PushDecision": "results",
    "RetainedItems": "results",
    "RetainedText": "results",
    "TextRetainer": "text",
    "retain_head_tail": "text",
    "js_utf8_decode": "utf8",
    "js_utf8_encode": "utf8",
    "utf8_length": "utf8",
}

__all__ = [
    "HeadTailLimit",
    "ItemRetainer",
    "Omitted",
    "PushDecision",
    "RetainedItems",
    "RetainedText",
    "RetentionNotice",
    "TextRetainer",
    "describe_omitted",
    "format_retention_notice",
    "js_utf8_decode",
    "js_utf8_encode",
    "retain_head_tail",
    "utf8_length",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh_retention' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
