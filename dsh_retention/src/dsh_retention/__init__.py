"""Byte-exact UTF-8 head/tail text retention.

Keeps the first and/or last N bytes of a text (or the first N items of a sequence) with an
exact count of what was left out, never splitting a code point at a cut. Byte counts follow
JavaScript's UTF-8, so results match the reference implementation.
"""

from .items import ItemRetainer
from .notice import HeadTailLimit, RetentionNotice, describe_omitted, format_retention_notice
from .results import Omitted, PushDecision, RetainedItems, RetainedText
from .text import TextRetainer, retain_head_tail
from .utf8 import js_utf8_decode, js_utf8_encode, utf8_length

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
