"""The embedded default store: one SQLite file (WAL) holding every session's log.

Schema choices, each for a figure the store must meet:

- `events` keeps each event's full log line as JSON text under an integer key
  `(session_pk << 32) | seq`, so one B-tree holds a session's log in order and a point lookup
  is a rowid lookup.
- `surface` materialises every session's current surface (`ord` is the position key): an
  append adds a row, a replace deletes the shadowed run and takes the position of its first
  node. Reading a surface joins these rows to their events and never touches chunks or
  shadowed events, so it costs time in proportion to the surface, not the log. Each row also
  keeps the node's `SurfaceText` (type, source, display text), so readers that need only the
  text of a conversation read small rows and decode no JSON.
- `sessions` keeps the header, the next seq, and the latest title, so listing sessions with
  titles reads no log.
- `surface_fts` and `session_names` are the full-text indexes candidate search reads, kept by
  triggers in the transaction that writes the rows they mirror. `surface_fts` keeps no copy of
  the text (a snippet is cut from `surface`), and its keys put neighbouring sessions' nodes
  near one another, so the index stays smaller than the text it indexes. `session_rank` keeps
  what a search ranks each session by (cwd number, creation time) in a few bytes, so ranking
  thousands of matches reads a small table rather than the wide `sessions` rows.

Modules: `connection` (opening the file, transactions), `schema` (creating, recognising and
upgrading the file), `store` (`SqliteSessionStore`: reads and writes), `search` (the indexes and
the ranked query), `locks` (session leases: a lock file per driven session, beside the database).
"""

from dsh_host.store.sqlite.schema import SCHEMA_VERSION
from dsh_host.store.sqlite.store import SqliteSessionStore

__all__ = ["SCHEMA_VERSION", "SqliteSessionStore"]
