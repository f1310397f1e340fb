"""The stores' text codec: keeping any Python string in a database that cannot hold some of them.

Session ids, cwds, titles and texts are arbitrary Python strings, lone surrogates included
(a JavaScript log can spell one), and PostgreSQL text cannot hold NUL either. What a text
column cannot hold goes in as its UTF-8 bytes with surrogates passed through ("surrogatepass"),
which decode back to the very same string:

- Ids are always stored as those bytes: a BLOB (`bytea`) compares bytewise, which for UTF-8 is
  code-point order, so `ORDER BY id` stays exact.
- Other free text is stored as text when it can be. SQLite keeps the bytes in the same column
  (`to_sqlite` / `from_sqlite`); PostgreSQL in a `bytea` column beside the text one
  (`to_postgres` / `from_postgres`), and packs a surface row's four fields into one (`pack_fields`).
- JSON text (event lines, headers) escapes what it cannot hold instead (`json_text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import overload

from dsh_host.session.events import SurfaceText

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNFIT_POSTGRES = re.compile("[\x00\ud800-\udfff]")
# A packed row joins its fields with 0xFF and marks None with 0xFE: neither byte ever occurs in
# UTF-8, surrogates included.
_FIELD_SEP, _NONE = b"\xff", b"\xfe"


def encode(text: str) -> bytes:
    """A string's UTF-8 bytes, lone surrogates included."""
    return text.encode("utf-8", "surrogatepass")


def decode(raw: bytes) -> str:
    """The string `encode` made these bytes from.

    Listings and searches decode every row's id inline (`raw.decode("utf-8", "surrogatepass")`):
    a call per row would cost more than the decoding.
    """
    return raw.decode("utf-8", "surrogatepass")


def json_text(text: str) -> str:
    """JSON text with every surrogate code point written as its `\\uXXXX` escape (valid UTF-8).

    Both halves of a pair are escaped too; `json.loads` reads them back as the one character
    they encode, as it reads any JSON text.
    """
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def folded(value: str | None) -> bytes | None:
    """A name as candidate search matches it: Python's `str.lower`, encoded."""
    return None if value is None else encode(value.lower())


# -- SQLite: text, or its bytes in the same column -------------------------------------------


@overload
def to_sqlite(value: str) -> str | bytes: ...
@overload
def to_sqlite(value: None) -> None: ...
def to_sqlite(value: str | None) -> str | bytes | None:
    """Free text for an SQLite column: itself, or its bytes when it holds a surrogate."""
    if value is None or value.isascii() or not _SURROGATE.search(value):
        return value
    return encode(value)


@overload
def from_sqlite(value: str | bytes) -> str: ...
@overload
def from_sqlite(value: None) -> None: ...
def from_sqlite(value: str | bytes | None) -> str | None:
    """The string `to_sqlite` stored."""
    return decode(value) if isinstance(value, bytes) else value


# -- PostgreSQL: a text column and a bytea column beside it ----------------------------------


def to_postgres(value: str | None) -> tuple[str | None, bytes | None]:
    """Free text as (text, None), or (None, its bytes) when PostgreSQL text cannot hold it."""
    if value is None or not _UNFIT_POSTGRES.search(value):
        return value, None
    return None, encode(value)


def from_postgres(text: str | None, raw: bytes | None) -> str | None:
    """The string `to_postgres` split into its two columns."""
    return text if raw is None else decode(bytes(raw))


def time_from_postgres(value: float) -> int | float:
    """A time read from a `double precision` column as SQLite's NUMERIC reads it back: an int when integral."""
    return int(value) if value.is_integer() else value


def fits_postgres(fields: Sequence[str | None]) -> bool:
    """Whether PostgreSQL text can hold every field."""
    return not any(field is not None and _UNFIT_POSTGRES.search(field) for field in fields)


def pack_fields(fields: Sequence[str | None]) -> bytes:
    """Several optional strings as one bytea value (for rows whose text columns cannot hold them)."""
    return _FIELD_SEP.join(_NONE if field is None else encode(field) for field in fields)


def unpack_surface_text(raw: bytes) -> SurfaceText:
    """The `SurfaceText` whose fields `pack_fields` packed."""
    kind, source_kind, source_plugin, text = bytes(raw).split(_FIELD_SEP)
    return SurfaceText(decode(kind), _optional(source_kind), _optional(source_plugin), decode(text))


def _optional(field: bytes) -> str | None:
    return None if field == _NONE else decode(field)
