"""What both stores write and read the same way: header rows, JSON text, snapshot records."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from dsh_host.session.events import SessionHeader, SurfaceText
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(text: str) -> str:
    """Compact JSON text with each lone surrogate written as its `\\uXXXX` escape (valid UTF-8)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def header_from_row(text: str, session_id: str | None = None) -> SessionHeader:
    """The header a store kept as JSON text; `session_id` (the exact id column) wins over its JSON."""
    raw = json.loads(text)
    return SessionHeader(
        # The id column is exact; JSON text would merge a Python string's surrogate halves.
        id=raw["id"] if session_id is None else session_id,
        created_at=raw["createdAt"],
        cwd=raw.get("cwd"),
        version=raw.get("version", 0),
        parent_session=raw.get("parentSession"),
        seed_length=raw.get("seedLength"),
        delegation_depth=raw.get("delegationDepth"),
    )


def surface_snapshot(header_text: str, session_id: str, next_seq: int, lines: Iterable[tuple[str]]) -> SurfaceSnapshot:
    """A `SurfaceSnapshot` from a session row's header and next seq and its surface event lines."""
    loads = json.loads
    return SurfaceSnapshot(
        header=header_from_row(header_text, session_id),
        captured_through_seq=next_seq - 1 if next_seq else None,
        events=[loads(line) for (line,) in lines],
    )


def surface_texts(header_text: str, session_id: str, next_seq: int, texts: list[SurfaceText]) -> SurfaceTexts:
    """A `SurfaceTexts` from a session row's header and next seq and its nodes' texts."""
    return SurfaceTexts(
        header=header_from_row(header_text, session_id),
        captured_through_seq=next_seq - 1 if next_seq else None,
        texts=texts,
    )
