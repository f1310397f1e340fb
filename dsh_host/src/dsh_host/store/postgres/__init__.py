"""The team store: sessions in PostgreSQL, each role seeing only what row-level security lets it.

The operations and their semantics are the SQLite store's (`dsh_host.store.sqlite`); the schema
mirrors its choices, in a schema `dsh` of its own:

- `events` keeps each event's full log line under the key `(session_pk, seq)`.
- `surface` materialises every session's current surface (`ord` is the position key) with each
  node's `SurfaceText`, so surface reads never touch log-only or shadowed events.
- `sessions` keeps the header, the next seq and ord, and the latest title, so listing reads no
  log; for candidate search, the id, cwd and title lower-cased as Python lowers them
  (`*_folded`, UTF-8 bytes), which a name match scans with `position`; and the team columns:
  `owner` (the role that created the session) and `reader` (one group role it is shared with,
  read-only).

Visibility is the database's job, not this package's: every table holding session data has
forced row-level security. A role sees its own sessions and those shared with a role it is a
member of, and changes only its own. A session the connecting role cannot see is, to it, a
session that does not exist. The store refuses to run as a superuser or a role with BYPASSRLS,
which would see everything.

PostgreSQL text holds neither NUL nor lone surrogates; how ids, cwds, titles and surface texts
holding them are kept is `dsh_host.store.codec`'s.

Modules: `pool` (settings, connections, the role check, transactions), `schema` (migrations,
`init_schema` for `dsh store init`, the version check), `writes`, `reads`, `search`, and `store`
(`PostgresSessionStore`, one transaction per operation). Importing this package imports psycopg
(the extra `dsh-host[postgres]`).
"""

from dsh_host.store.postgres.pool import StoreUnavailable, connection_settings
from dsh_host.store.postgres.schema import SCHEMA_VERSION, init_schema
from dsh_host.store.postgres.store import PostgresSessionStore

__all__ = ["SCHEMA_VERSION", "PostgresSessionStore", "StoreUnavailable", "connection_settings", "init_schema"]
