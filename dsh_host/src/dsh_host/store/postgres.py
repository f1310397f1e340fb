"""The team store: sessions in PostgreSQL, each role seeing only what row-level security lets it.

The operations and their semantics are the SQLite store's (`dsh_host.store.sqlite`); the schema
mirrors its choices, in a schema `dsh` of its own:

- `events` keeps each event's full log line under the key `(session_pk, seq)`.
- `surface` materialises every session's current surface (`ord` is the position key) with each
  node's `SurfaceText`, so surface reads never touch log-only or shadowed events.
- `sessions` keeps the header, the next seq and ord, the latest title and the time of the last
  event, so listing reads no log (a page of it is a range of `sessions_newest_first`); for
  candidate search, the id, cwd and title lower-cased as Python lowers them
  (`*_folded`, UTF-8 bytes), which a name match scans with `position`; and the team columns:
  `owner` (the role that created the session) and `reader` (one group role it is shared with,
  read-only).

Visibility is the database's job, not this module's: every table holding session data has
forced row-level security. A role sees its own sessions and those shared with a role it is a
member of, and changes only its own. A session the connecting role cannot see is, to it, a
session that does not exist. The store refuses to run as a superuser or a role with BYPASSRLS,
which would see everything.

PostgreSQL text holds neither NUL nor lone surrogates, which session ids, cwds, titles and
surface texts may contain. Ids are stored as their UTF-8 bytes ("surrogatepass"; `bytea`
compares bytewise, which for UTF-8 is code-point order, so `ORDER BY id` stays exact). Other
free text is stored as text when it can be, and otherwise in a `bytea` column beside it. Event
and header lines are JSON, whose escapes (`\\u0000`, `\\ud800`) carry those characters as text.

Candidate search's body match reads `surface.search`, a generated `tsvector` (the `simple`
configuration: no stemming, no stop words) of each node a reference shows, under a GIN index;
relevance is `ts_rank`. Nodes whose text PostgreSQL cannot hold (NUL, lone surrogates) are
not indexed.

Every flushed batch is one transaction that locks its session's row first, so two hosts
appending to one session serialise there; the second finds the seq it expected taken and gets
a conflict error with nothing written. Multi-statement reads run in one REPEATABLE READ
transaction, so they observe one snapshot. The schema is created and upgraded by
`PostgresSessionStore.init_schema` (`dsh store init`), never implicitly.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg
import psycopg_pool
from psycopg import conninfo, errors

from dsh_host.errors import ConfigError
from dsh_host.session.events import Event, SessionHeader, SurfaceText, event_from_json, surface_text
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts
from dsh_host.settings import read_int, read_str, reject_unknown
from dsh_host.store.base import (
    CandidateRow,
    ListingKey,
    SearchCancelled,
    SessionNotFound,
    SessionRow,
    StoredTitle,
    StoreError,
)

# The header and event lines are the same JSON text as in SQLite, made and read the same way.
from dsh_host.store.rows import header_from_row, json_text, surface_snapshot, surface_texts
from dsh_host.store.search import body_words, name_needle, searchable_condition

SCHEMA_VERSION = 5
SCHEMA = "dsh"
DEFAULT_POOL_SIZE = 4
DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10

# Each entry upgrades the schema from the version before it (entry 0 creates version 1). The
# statements run in `init_schema`'s single transaction.
_MIGRATIONS: tuple[str, ...] = (
    """
CREATE TABLE dsh.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE dsh.sessions (
    pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id bytea NOT NULL UNIQUE,
    owner name NOT NULL DEFAULT current_user,
    reader regrole,
    created_at double precision NOT NULL,
    cwd text,
    cwd_raw bytea,
    header text NOT NULL,
    next_seq bigint NOT NULL,
    next_ord bigint NOT NULL,
    title text,
    title_raw bytea,
    title_seq bigint,
    title_time bigint,
    raw_surface_text boolean NOT NULL DEFAULT false
);
CREATE INDEX sessions_newest_first ON dsh.sessions (created_at DESC, id);
CREATE TABLE dsh.events (
    session_pk bigint NOT NULL,
    seq bigint NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (session_pk, seq)
);
CREATE TABLE dsh.surface (
    session_pk bigint NOT NULL,
    ord bigint NOT NULL,
    seq bigint NOT NULL,
    type text,
    source_kind text,
    source_plugin text,
    text text,
    raw bytea,
    PRIMARY KEY (session_pk, ord)
);
CREATE UNIQUE INDEX surface_by_seq ON dsh.surface (session_pk, seq);

ALTER TABLE dsh.sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh.sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY readable ON dsh.sessions FOR SELECT
    USING (owner = current_user OR pg_has_role(current_user, reader, 'MEMBER'));
CREATE POLICY created ON dsh.sessions FOR INSERT WITH CHECK (owner = current_user);
CREATE POLICY changed ON dsh.sessions FOR UPDATE USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY deleted ON dsh.sessions FOR DELETE USING (owner = current_user);

-- A row of events or surface is as visible as its session's row is (the subquery is under the
-- sessions policy). Scalar subqueries, not EXISTS: the planner may turn an EXISTS into a hash of
-- every visible session, a scan of the sessions table on each read; a scalar subquery stays
-- one primary-key lookup per row.
CREATE FUNCTION dsh.readable(bigint) RETURNS boolean LANGUAGE sql STABLE
    RETURN (SELECT true FROM dsh.sessions s WHERE s.pk = $1);
CREATE FUNCTION dsh.owned(bigint) RETURNS boolean LANGUAGE sql STABLE
    RETURN (SELECT s.owner = current_user FROM dsh.sessions s WHERE s.pk = $1);

ALTER TABLE dsh.events ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh.events FORCE ROW LEVEL SECURITY;
CREATE POLICY readable ON dsh.events FOR SELECT USING (dsh.readable(session_pk));
CREATE POLICY written ON dsh.events FOR INSERT WITH CHECK (dsh.owned(session_pk));
CREATE POLICY deleted ON dsh.events FOR DELETE USING (dsh.owned(session_pk));

ALTER TABLE dsh.surface ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh.surface FORCE ROW LEVEL SECURITY;
CREATE POLICY readable ON dsh.surface FOR SELECT USING (dsh.readable(session_pk));
CREATE POLICY written ON dsh.surface FOR INSERT WITH CHECK (dsh.owned(session_pk));
CREATE POLICY deleted ON dsh.surface FOR DELETE USING (dsh.owned(session_pk));

-- Ordinary roles need no DDL: row-level security decides what each one reads and writes.
GRANT USAGE ON SCHEMA dsh TO PUBLIC;
GRANT SELECT ON dsh.meta TO PUBLIC;
GRANT SELECT, INSERT, DELETE ON dsh.sessions, dsh.events, dsh.surface TO PUBLIC;
GRANT UPDATE (reader, next_seq, next_ord, title, title_raw, title_seq, title_time, raw_surface_text)
    ON dsh.sessions TO PUBLIC;
""",
    f"""
ALTER TABLE dsh.sessions ADD COLUMN id_folded bytea, ADD COLUMN cwd_folded bytea, ADD COLUMN title_folded bytea;
GRANT UPDATE (title_folded) ON dsh.sessions TO PUBLIC;
ALTER TABLE dsh.surface ADD COLUMN search tsvector GENERATED ALWAYS AS
    (CASE WHEN {searchable_condition("")} THEN to_tsvector('simple', text) END) STORED;
CREATE INDEX surface_search ON dsh.surface USING gin (search);
""",
    """
-- Rows are added only to sessions the role owns. A per-row policy check would cost a lookup per
-- row, several times the insert itself for a flush of a thousand events; this statement-level
-- check looks each distinct session up once, and aborts the whole statement otherwise.
CREATE FUNCTION dsh.check_owned() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    IF EXISTS (SELECT FROM (SELECT DISTINCT session_pk FROM added) a WHERE dsh.owned(a.session_pk) IS NOT TRUE)
    THEN
        RAISE EXCEPTION 'rows added to dsh.% belong to a session this role does not own', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$f$;
DROP POLICY written ON dsh.events;
DROP POLICY written ON dsh.surface;
CREATE POLICY added ON dsh.events FOR INSERT WITH CHECK (true);  -- checked by the owned trigger
CREATE POLICY added ON dsh.surface FOR INSERT WITH CHECK (true);  -- checked by the owned trigger
CREATE TRIGGER owned AFTER INSERT ON dsh.events REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION dsh.check_owned();
CREATE TRIGGER owned AFTER INSERT ON dsh.surface REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION dsh.check_owned();
-- The rare sessions whose cwd or title only bytea could hold, which a listing reads apart.
CREATE INDEX sessions_with_raw_text ON dsh.sessions (pk) WHERE cwd_raw IS NOT NULL OR title_raw IS NOT NULL;
""",
    """
-- A flush adds the rows of one session: its bounds settle that with one lookup, where a DISTINCT
-- over the added rows cost more than the insert. Rows of several sessions are checked one by one.
CREATE OR REPLACE FUNCTION dsh.check_owned() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
    lo bigint;
    hi bigint;
BEGIN
    SELECT min(session_pk), max(session_pk) INTO lo, hi FROM added;
    IF lo IS NOT NULL AND NOT (lo = hi AND dsh.owned(lo) IS TRUE)
        AND EXISTS (SELECT FROM (SELECT DISTINCT session_pk FROM added) a WHERE dsh.owned(a.session_pk) IS NOT TRUE)
    THEN
        RAISE EXCEPTION 'rows added to dsh.% belong to a session this role does not own', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$f$;
""",
    r"""
-- The time of each session's last event (its creation time while it has none), from the event
-- line at next_seq - 1, whose envelope starts type, seq, time (a line that does not counts as none).
-- Every role's sessions are filled: row-level security is lifted for this transaction only.
ALTER TABLE dsh.sessions ADD COLUMN last_activity_at double precision;
ALTER TABLE dsh.sessions NO FORCE ROW LEVEL SECURITY;
ALTER TABLE dsh.events NO FORCE ROW LEVEL SECURITY;
UPDATE dsh.sessions AS s SET last_activity_at = coalesce(
    (SELECT substring(e.line FROM '^\{"type":"(?:[^"\\]|\\.)*","seq":[0-9]+,"time":([0-9]+)[,}]')::double precision
        FROM dsh.events AS e WHERE e.session_pk = s.pk AND e.seq = s.next_seq - 1),
    s.created_at
);
ALTER TABLE dsh.events FORCE ROW LEVEL SECURITY;
ALTER TABLE dsh.sessions FORCE ROW LEVEL SECURITY;
ALTER TABLE dsh.sessions ALTER COLUMN last_activity_at SET NOT NULL;
GRANT UPDATE (last_activity_at) ON dsh.sessions TO PUBLIC;
""",
)
# Python steps of a migration, by the version it creates, run after its statements.
_FOLD_VERSION = 2
assert len(_MIGRATIONS) == SCHEMA_VERSION

_UNFIT = re.compile("[\x00\ud800-\udfff]")
# Raw surface rows join their four fields with 0xFF and mark None with 0xFE: neither byte ever
# occurs in UTF-8, surrogates included.
_FIELD_SEP, _NONE = b"\xff", b"\xfe"

# Arrays go in binary: the text format escapes every element in Python, which costs more than
# the insert itself.
_INSERT_EVENTS = (
    "INSERT INTO dsh.events (session_pk, seq, line) SELECT %s, seq, line FROM unnest(%b::bigint[], %b::text[]) "
    "AS t (seq, line)"
)
_INSERT_SURFACE = (
    "INSERT INTO dsh.surface (session_pk, ord, seq, type, source_kind, source_plugin, text, raw) "
    "SELECT %s, * FROM unnest(%b::bigint[], %b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::bytea[])"
)


_LISTED = "id, created_at, cwd, title, last_activity_at"
_LIST = f"SELECT {_LISTED} FROM dsh.sessions ORDER BY created_at DESC, id"
# A page starts right after the key (created_at, id) in newest-first order: the index range below
# that created_at, less the ties at it that sort before the id. It reads its rows' raw text too.
_FIRST_PAGE = f"SELECT {_LISTED}, cwd_raw, title_raw FROM dsh.sessions ORDER BY created_at DESC, id LIMIT %(limit)s"
_PAGE_AFTER = (
    f"SELECT {_LISTED}, cwd_raw, title_raw FROM dsh.sessions "
    "WHERE created_at <= %(at)s AND (created_at < %(at)s OR id > %(id)s) ORDER BY created_at DESC, id LIMIT %(limit)s"
)
_LIST_RAW = "SELECT id, cwd_raw, title_raw FROM dsh.sessions WHERE cwd_raw IS NOT NULL OR title_raw IS NOT NULL"
# Reads select a session's rows by its id, so they need not wait for the sessions row first: in
# pipeline mode both statements go out together.
_PK_OF = "(SELECT pk FROM dsh.sessions WHERE id = %s)"
_SURFACE_LINES = (
    "SELECT e.line FROM dsh.surface AS s JOIN dsh.events AS e ON e.session_pk = s.session_pk AND e.seq = s.seq "
    f"WHERE s.session_pk = {_PK_OF} ORDER BY s.ord"
)
_SURFACE_TEXTS = (
    f"SELECT type, source_kind, source_plugin, text, raw FROM dsh.surface WHERE session_pk = {_PK_OF} ORDER BY ord"
)
_LINES = f"SELECT line FROM dsh.events WHERE session_pk = {_PK_OF} ORDER BY seq"


_HEADLINE = 'MaxFragments=1, MaxWords=12, MinWords=4, ShortWord=0, StartSel="", StopSel=""'
# Candidate search (see `SessionStore.search_candidates`). Names: the folded needle anywhere in
# the folded id, cwd or title (bytes, so exactly Python's `in`). Body: every word in one node,
# the session's best node standing for it. Snippets are cut for the returned rows only.
_NAMES = """names AS MATERIALIZED (
    SELECT pk FROM dsh.sessions
    WHERE position(%(needle)s IN id_folded) > 0 OR position(%(needle)s IN cwd_folded) > 0
        OR position(%(needle)s IN title_folded) > 0
)"""
_RANKED = f"""
SELECT r.id, r.created_at, r.cwd, r.cwd_raw, r.title, r.title_raw, r.last_activity_at,
    CASE WHEN r.text IS NOT NULL THEN
        CASE WHEN starts_with(r.text, h.h) THEN '' ELSE '…' END || h.h
        || CASE WHEN right(r.text, length(h.h)) = h.h THEN '' ELSE '…' END
    END,
    r.score
FROM (
    SELECT s.id, s.created_at, s.cwd, s.cwd_raw, s.title, s.title_raw, s.last_activity_at, m.text, m.score,
        CASE WHEN NOT %(grouped)s THEN 0 WHEN s.cwd IS NULL AND s.cwd_raw IS NULL THEN 1
            WHEN %(has_cwd)s AND s.cwd IS NOT DISTINCT FROM %(cwd)s AND s.cwd_raw IS NOT DISTINCT FROM %(cwd_raw)s
            THEN 0 ELSE 2 END AS grp
    FROM matched AS m JOIN dsh.sessions AS s ON s.pk = m.pk
    WHERE s.id IS DISTINCT FROM %(target)s
    ORDER BY grp, m.text IS NOT NULL, m.score, s.created_at DESC, s.id
    LIMIT %(limit)s
) AS r
LEFT JOIN LATERAL (
    SELECT ts_headline('simple', r.text, plainto_tsquery('simple', %(words)s), '{_HEADLINE}') AS h
    WHERE r.text IS NOT NULL
) AS h ON true
ORDER BY r.grp, r.text IS NOT NULL, r.score, r.created_at DESC, r.id
"""
_SEARCH_NAMES = f"WITH {_NAMES}, matched AS (SELECT pk, NULL::text AS text, 0.0::float8 AS score FROM names)" + _RANKED
_SEARCH = (
    f"""WITH {_NAMES},
q AS (SELECT plainto_tsquery('simple', %(words)s) AS q),
body AS (
    SELECT DISTINCT ON (u.session_pk) u.session_pk AS pk, u.text, -ts_rank(u.search, q.q)::float8 AS score
    FROM dsh.surface AS u, q WHERE u.search @@ q.q AND u.session_pk NOT IN (SELECT pk FROM names)
    ORDER BY u.session_pk, score, u.seq
),
matched AS (
    SELECT pk, NULL::text AS text, 0.0::float8 AS score FROM names
    UNION ALL
    SELECT pk, text, score FROM body
)"""
    + _RANKED
)


class StoreUnavailable(StoreError):
    """The database cannot serve as a store (unreachable, wrong role, missing or newer schema)."""

    exit_code = 2


def _id(session_id: str) -> bytes:
    return session_id.encode("utf-8", "surrogatepass")


def _from_id(value: bytes) -> str:
    return bytes(value).decode("utf-8", "surrogatepass")


def _split(value: str | None) -> tuple[str | None, bytes | None]:
    """A free-text value as (text, None), or (None, its UTF-8 bytes) when text cannot hold it."""
    if value is None or not _UNFIT.search(value):
        return value, None
    return None, value.encode("utf-8", "surrogatepass")


def _joined(text: str | None, raw: bytes | None) -> str | None:
    return text if raw is None else bytes(raw).decode("utf-8", "surrogatepass")


def _time(value: float) -> int | float:
    """A stored time as SQLite's NUMERIC column reads it back: an int when integral."""
    return int(value) if value.is_integer() else value


def _surface_fields(text: SurfaceText) -> tuple[Any, ...]:
    """(type, source_kind, source_plugin, text, raw) for a surface row."""
    if not any(field is not None and _UNFIT.search(field) for field in text):
        return (*text, None)
    raw = _FIELD_SEP.join(_NONE if f is None else f.encode("utf-8", "surrogatepass") for f in text)
    return (None, None, None, None, raw)


def _surface_text(raw: bytes) -> SurfaceText:
    fields = [None if f == _NONE else f.decode("utf-8", "surrogatepass") for f in bytes(raw).split(_FIELD_SEP)]
    return SurfaceText(*fields)


def _one_line(exc: BaseException) -> str:
    """A database error as one line (libpq messages span several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def connection_settings(table: Mapping[str, Any]) -> tuple[str, int, int]:
    """(dsn, pool size, statement timeout in ms) from a `[stores.postgres]` table, validated."""
    name = "stores.postgres"
    reject_unknown(name, table, ("dsn", "pool_size", "statement_timeout_ms"))
    dsn = read_str(name, table, "dsn", "")
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"[{name}] dsn is not valid: {_one_line(exc)}") from None
    if "password" in params:
        raise ConfigError(f"[{name}] dsn must not hold a password: set PGPASSWORD or use a pgpass file (~/.pgpass)")
    pool_size = read_int(name, table, "pool_size", DEFAULT_POOL_SIZE, minimum=1)
    timeout = read_int(name, table, "statement_timeout_ms", DEFAULT_STATEMENT_TIMEOUT_MS, minimum=0)
    return dsn, pool_size, timeout


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection:
    """One connection; a failure is a StoreUnavailable naming the cause in one line."""
    try:
        return psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, **kwargs)
    except psycopg.ProgrammingError as exc:
        raise StoreUnavailable(f"PostgreSQL store: invalid dsn: {_one_line(exc)}") from None
    except psycopg.Error as exc:
        raise StoreUnavailable(f"PostgreSQL store: cannot connect: {_one_line(exc)}") from None


def _schema_version(conn: psycopg.Connection) -> int | None:
    """The stored schema version, or None when the database has no dsh schema."""
    if conn.execute("SELECT to_regclass('dsh.meta')").fetchone()[0] is None:
        return None
    row = conn.execute("SELECT value FROM dsh.meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else int(row[0])


def init_schema(dsn: str) -> tuple[int | None, int]:
    """Create or upgrade the schema in one transaction; returns (version before, version after).

    Idempotent: a current schema is left as it is. Run it as a role that may create a schema in
    the database (its owner); concurrent runs serialise on an advisory lock.
    """
    with connect(dsn, autocommit=True) as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('dsh store init'))")
                before = _schema_version(conn)
                if before is not None and before > SCHEMA_VERSION:
                    raise StoreUnavailable(_newer(conn, before))
                start = before or 0
                if start == 0:
                    conn.execute("CREATE SCHEMA IF NOT EXISTS dsh")
                for migration in _MIGRATIONS[start:]:
                    conn.execute(migration)
                if start < _FOLD_VERSION <= SCHEMA_VERSION:
                    _fold_stored_names(conn)
                if start < SCHEMA_VERSION:
                    conn.execute(
                        "INSERT INTO dsh.meta (key, value) VALUES ('schema_version', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        (str(SCHEMA_VERSION),),
                    )
        except psycopg.Error as exc:
            raise StoreUnavailable(f"PostgreSQL store: dsh store init failed: {_one_line(exc)}") from None
    return before, SCHEMA_VERSION


def _fold(value: str | None) -> bytes | None:
    """A name as the search matches it: Python's `str.lower`, as UTF-8 bytes (surrogates kept)."""
    return None if value is None else value.lower().encode("utf-8", "surrogatepass")


def _fold_stored_names(conn: psycopg.Connection) -> None:
    """Fill the folded names of every stored session, whoever owns it (during `init_schema`).

    Row-level security is forced even on the table's owner: lifted for this transaction only.
    """
    conn.execute("ALTER TABLE dsh.sessions NO FORCE ROW LEVEL SECURITY")
    rows = conn.execute("SELECT pk, id, cwd, cwd_raw, title, title_raw FROM dsh.sessions").fetchall()
    folded = [
        (pk, _fold(_from_id(sid)), _fold(_joined(cwd, cwd_raw)), _fold(_joined(title, title_raw)))
        for pk, sid, cwd, cwd_raw, title, title_raw in rows
    ]
    if folded:
        conn.execute(
            "UPDATE dsh.sessions AS s SET id_folded = t.i, cwd_folded = t.c, title_folded = t.t "
            "FROM unnest(%s::bigint[], %s::bytea[], %s::bytea[], %s::bytea[]) AS t (pk, i, c, t) WHERE s.pk = t.pk",
            [list(column) for column in zip(*folded, strict=True)],
        )
    conn.execute("ALTER TABLE dsh.sessions FORCE ROW LEVEL SECURITY")


def _newer(conn: psycopg.Connection, version: int) -> str:
    return (
        f"PostgreSQL store: database {conn.info.dbname!r} has dsh schema version {version}, newer than this dsh "
        f"supports ({SCHEMA_VERSION}); upgrade dsh to use it"
    )


def check_database(conn: psycopg.Connection) -> str:
    """Refuse a role that bypasses row-level security and a missing or foreign schema version.

    Returns the connecting role's name (the principal).
    """
    role, superuser, bypass = conn.execute(
        "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    if superuser or bypass:
        what = "a superuser" if superuser else "a role with BYPASSRLS"
        raise StoreUnavailable(
            f"PostgreSQL store: refusing to run as {role!r}, {what}: row-level security would not apply; "
            "connect as an ordinary role"
        )
    version = _schema_version(conn)
    if version is None:
        raise StoreUnavailable(
            f"PostgreSQL store: database {conn.info.dbname!r} has no dsh schema; "
            "run `dsh store init` as the database's owner"
        )
    if version > SCHEMA_VERSION:
        raise StoreUnavailable(_newer(conn, version))
    if version < SCHEMA_VERSION:
        raise StoreUnavailable(
            f"PostgreSQL store: database {conn.info.dbname!r} has dsh schema version {version}, older than this "
            f"dsh ({SCHEMA_VERSION}); run `dsh store init` as the database's owner to upgrade it"
        )
    return role


class PostgresSessionStore:
    """Sessions in a PostgreSQL database. Open with `PostgresSessionStore.open(dsn)`.

    Thread-safe: each operation takes a connection from a pool for its own transaction.
    """

    def __init__(self, pool: psycopg_pool.ConnectionPool, role: str, dbname: str) -> None:
        self._pool = pool
        self.role = role
        self.dbname = dbname
        self._closed = False

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
    ) -> PostgresSessionStore:
        """Connect, check the role and the schema, and start the pool; nothing is written."""
        options = f"-c statement_timeout={statement_timeout_ms}"
        with connect(dsn, autocommit=True, options=options) as conn:
            try:
                role = check_database(conn)
            except psycopg.Error as exc:  # e.g. no access to the dsh schema: one line, not a traceback
                raise StoreUnavailable(f"PostgreSQL store: cannot check the database: {_one_line(exc)}") from None
            dbname = conn.info.dbname
        pool = psycopg_pool.ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "options": options, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=CONNECT_TIMEOUT_S,
            open=False,
            name="dsh-store",
        )
        pool.open(wait=False)
        return cls(pool, role, dbname)

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> PostgresSessionStore:
        """Open the store a `[stores.postgres]` table describes."""
        dsn, pool_size, timeout = connection_settings(table)
        return cls.open(dsn, pool_size=pool_size, statement_timeout_ms=timeout)

    def close(self) -> None:
        self._closed = True
        self._pool.close()

    # -- transactions ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection; database errors become one-line StoreErrors.

        The transaction runs in pipeline mode: statements are sent as they are issued and the
        connection waits only where a result is fetched, so a flush costs two round trips (lock
        the session's row; write everything and commit) and a read one.
        """
        if self._closed:
            raise StoreError(f"session store (PostgreSQL database {self.dbname!r}) is closed")
        broken = False
        try:
            with self._pool.connection() as conn:
                try:
                    with conn.pipeline():
                        conn.execute(begin)
                        yield conn
                        conn.execute("COMMIT")
                except BaseException:
                    broken = conn.broken
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")
                    raise
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(f"PostgreSQL store: no connection to {self.dbname!r}: {_one_line(exc)}") from None
        except errors.UniqueViolation as exc:
            raise StoreError(f"PostgreSQL store: conflict with another writer: {_one_line(exc)}") from None
        except psycopg.Error as exc:
            if broken:
                # The server dropped the connection (it restarted, or went away): the pool's idle
                # connections are as stale, so they are replaced now rather than failing the next
                # calls one by one once the server is back.
                self._pool.check()
            raise StoreError(f"PostgreSQL store: {_one_line(exc)}") from None

    def _read(self) -> contextlib.AbstractContextManager[psycopg.Connection]:
        """A read transaction: every statement inside sees one snapshot."""
        return self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _session_row(self, conn: psycopg.Connection, session_id: str, columns: str) -> tuple[Any, ...]:
        row = conn.execute(f"SELECT {columns} FROM dsh.sessions WHERE id = %s", (_id(session_id),)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return row

    def _owned_for_update(self, conn: psycopg.Connection, session_id: str) -> tuple[Any, ...] | None:
        """The session's (pk, next_seq, next_ord), locked, when this role owns it; None when it is not stored.

        A session that is only shared with this role is read-only here.
        """
        key = _id(session_id)
        # FOR UPDATE passes only rows the UPDATE policy lets this role change: its own.
        row = conn.execute(
            "SELECT pk, next_seq, next_ord FROM dsh.sessions WHERE id = %s FOR UPDATE", (key,)
        ).fetchone()
        if row is not None:
            return row
        shared = conn.execute("SELECT owner FROM dsh.sessions WHERE id = %s", (key,)).fetchone()
        if shared is not None:
            raise StoreError(
                f"session {session_id!r} is shared with you read-only; only its owner {shared[0]!r} can change it"
            )
        return None

    # -- writes ------------------------------------------------------------------------------

    def append(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Persist a contiguous batch in one transaction; the first batch creates the session."""
        if not events:
            return
        first = events[0].seq
        for offset, event in enumerate(events):
            if event.seq != first + offset:
                raise StoreError(
                    f"session {header.id!r}: batch is not contiguous (seq {event.seq} where {first + offset} "
                    "was expected); nothing was written"
                )
        with self._transaction() as conn:
            # A batch from seq 0 is nearly always a new session's first: try to create it at once
            # (one round trip), and look the session up only when it exists.
            pk = self._try_insert_session(conn, header) if first == 0 else None
            if pk is not None:
                next_seq = next_ord = 0
            else:
                row = self._owned_for_update(conn, header.id)
                if row is None:
                    if first != 0:
                        raise StoreError(f"session {header.id!r} is not stored; its first batch must start at seq 0")
                    raise _taken(header.id)
                pk, next_seq, next_ord = row
            if first != next_seq:
                raise StoreError(
                    f"session {header.id!r}: batch starts at seq {first}, store expects {next_seq} "
                    "(another process wrote this session?); nothing was written"
                )
            self._write_events(conn, pk, events, next_ord)

    def _insert_session(self, conn: psycopg.Connection, header: SessionHeader) -> int:
        pk = self._try_insert_session(conn, header)
        if pk is None:
            raise _taken(header.id)
        return pk

    def _try_insert_session(self, conn: psycopg.Connection, header: SessionHeader) -> int | None:
        """Create the session's row; None when its id is taken (stored, if maybe invisible)."""
        row = conn.execute(
            "INSERT INTO dsh.sessions (id, created_at, cwd, cwd_raw, header, next_seq, next_ord, id_folded, "
            "cwd_folded, last_activity_at) VALUES (%s, %s, %s, %s, %s, 0, 0, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING RETURNING pk",
            (
                _id(header.id),
                header.created_at,
                *_split(header.cwd),
                json_text(json.dumps(header.to_json(), ensure_ascii=False)),
                _fold(header.id),
                _fold(header.cwd),
                header.created_at,
            ),
        ).fetchone()
        return None if row is None else row[0]

    def _write_events(self, conn: psycopg.Connection, pk: int, events: Sequence[Event], next_ord: int) -> None:
        seqs, lines = [], []
        title: tuple[Any, ...] | None = None
        for event in events:
            seqs.append(event.seq)
            lines.append(json_text(event.to_line()))
            if (
                event.type == "session/title"
                and isinstance(event.data, dict)
                and isinstance(event.data.get("title"), str)
            ):
                title = (*_split(event.data["title"]), event.seq, event.time, _fold(event.data["title"]))
        conn.execute(_INSERT_EVENTS, (pk, seqs, lines))
        appended: list[tuple[Any, ...]] = []
        raw_text = False
        for event in events:
            op = event.surface_op
            if op is None:
                continue
            fields = _surface_fields(surface_text(event.type, event.data))
            raw_text = raw_text or fields[-1] is not None
            if op == "append":
                appended.append((next_ord, event.seq, *fields))
                next_ord += 1
                continue
            # A replace may shadow nodes appended earlier in this batch: write those first.
            self._insert_surface(conn, pk, appended)
            appended = []
            lo, hi = conn.execute(
                "SELECT min(ord) FILTER (WHERE seq = %s), min(ord) FILTER (WHERE seq = %s) FROM dsh.surface "
                "WHERE session_pk = %s AND seq IN (%s, %s)",
                (op["start"], op["end"], pk, op["start"], op["end"]),
            ).fetchone()
            if lo is None or hi is None or lo > hi:
                raise StoreError(f"stored surface disagrees with replace at seq {event.seq}")
            conn.execute("DELETE FROM dsh.surface WHERE session_pk = %s AND ord BETWEEN %s AND %s", (pk, lo, hi))
            self._insert_surface(conn, pk, [(lo, event.seq, *fields)])
        self._insert_surface(conn, pk, appended)
        updates = "next_seq = %s, next_ord = %s, last_activity_at = %s"
        params: list[Any] = [events[-1].seq + 1, next_ord, events[-1].time]
        if title is not None:
            updates += ", title = %s, title_raw = %s, title_seq = %s, title_time = %s, title_folded = %s"
            params.extend(title)
        if raw_text:
            # Readers of the surface text then know to look at the raw column.
            updates += ", raw_surface_text = true"
        conn.execute(f"UPDATE dsh.sessions SET {updates} WHERE pk = %s", (*params, pk))

    def _insert_surface(self, conn: psycopg.Connection, pk: int, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            conn.execute(_INSERT_SURFACE, (pk, *map(list, zip(*rows, strict=True))))

    def import_log(self, header: SessionHeader, events: Sequence[Event], *, replace: bool = False) -> None:
        """Store a whole, already validated log in one transaction (`replace` drops an existing one)."""
        with self._transaction() as conn:
            row = self._owned_for_update(conn, header.id)
            if row is not None:
                if not replace:
                    raise StoreError(f"session {header.id!r} already exists (use --replace to overwrite it)")
                self._delete(conn, row[0])
            pk = self._insert_session(conn, header)
            if events:
                self._write_events(conn, pk, events, 0)

    def delete(self, session_id: str) -> bool:
        with self._transaction() as conn:
            row = self._owned_for_update(conn, session_id)
            if row is not None:
                self._delete(conn, row[0])
        return row is not None

    def _delete(self, conn: psycopg.Connection, pk: int) -> None:
        conn.execute("DELETE FROM dsh.events WHERE session_pk = %s", (pk,))
        conn.execute("DELETE FROM dsh.surface WHERE session_pk = %s", (pk,))
        conn.execute("DELETE FROM dsh.sessions WHERE pk = %s", (pk,))

    # -- team ----------------------------------------------------------------------------------

    def share(self, session_id: str, role: str | None) -> None:
        """Let members of `role` read the session (None: nobody but its owner); owner only."""
        with self._transaction() as conn:
            if self._owned_for_update(conn, session_id) is None:
                raise SessionNotFound(session_id)
            if role is not None and conn.execute("SELECT to_regrole(%s)", (_quoted_role(role),)).fetchone()[0] is None:
                raise StoreError(f"role {role!r} does not exist")
            conn.execute(
                "UPDATE dsh.sessions SET reader = %s::regrole WHERE id = %s",
                (None if role is None else _quoted_role(role), _id(session_id)),
            )

    def sharing(self, session_id: str) -> tuple[str, str | None]:
        """(owner, role the session is shared with or None) of a readable session."""
        with self._read() as conn:
            owner, reader = self._session_row(conn, session_id, "owner, reader::text")
        return owner, reader

    # -- reads -------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionRow]:
        """Every readable session, newest first (ties by id), with its latest title."""
        with self._read() as conn:
            listed = conn.execute(_LIST, binary=True)
            raw = {sid: (cwd, title) for sid, cwd, title in conn.execute(_LIST_RAW).fetchall()}
            rows = listed.fetchall()
        make = SessionRow._make
        # As from SQLite's NUMERIC column, an integral time reads back as an int.
        listing = [
            make((sid.decode("utf-8", "surrogatepass"), _time(at), cwd, title, _time(active)))
            for sid, at, cwd, title, active in rows
        ]
        if raw:  # the rare text that only bytea could hold
            for i, row in enumerate(listing):
                found = raw.get(_id(row.id))
                if found is not None:
                    cwd, title = found
                    listing[i] = row._replace(cwd=_joined(row.cwd, cwd), title=_joined(row.title, title))
        return listing

    def list_sessions_page(self, limit: int, after: ListingKey | None = None) -> list[SessionRow]:
        """At most `limit` readable sessions of the listing, from the first after `after` (see `SessionStore`)."""
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params.update(at=after[0], id=_id(after[1]))
        with self._read() as conn:
            rows = conn.execute(_FIRST_PAGE if after is None else _PAGE_AFTER, params, binary=True).fetchall()
        return [
            SessionRow(_from_id(sid), _time(at), _joined(cwd, cwd_raw), _joined(title, title_raw), _time(active))
            for sid, at, cwd, title, active, cwd_raw, title_raw in rows
        ]

    def has(self, session_id: str) -> bool:
        with self._read() as conn:
            return conn.execute("SELECT FROM dsh.sessions WHERE id = %s", (_id(session_id),)).fetchone() is not None

    def read_header(self, session_id: str) -> SessionHeader:
        with self._read() as conn:
            (header_text,) = self._session_row(conn, session_id, "header")
        return header_from_row(header_text, session_id)

    def read_title(self, session_id: str) -> StoredTitle | None:
        with self._read() as conn:
            title, raw, seq, time = self._session_row(conn, session_id, "title, title_raw, title_seq, title_time")
        return None if title is None and raw is None else StoredTitle(_joined(title, raw), seq, time)

    def search_candidates(
        self,
        query: str,
        *,
        target_id: str | None,
        target_cwd: str | None,
        limit: int,
        cancel: threading.Event | None = None,
        group_by_cwd: bool = True,
    ) -> list[CandidateRow]:
        """Ranked readable sessions matching `query` by name or surface text (see `SessionStore`)."""
        needle, words = _fold(name_needle(query)), " ".join(body_words(query))
        cwd, cwd_raw = _split(target_cwd)
        params = {
            "needle": needle,
            "words": words,
            "target": None if target_id is None else _id(target_id),
            "grouped": group_by_cwd,
            "has_cwd": target_cwd is not None,
            "cwd": cwd,
            "cwd_raw": cwd_raw,
            "limit": limit,
        }
        sql = _SEARCH if words else _SEARCH_NAMES
        if cancel is not None and cancel.is_set():
            raise SearchCancelled("candidate search was cancelled")
        try:
            with self._read() as conn, _cancelling(conn, cancel):
                rows = conn.execute(sql, params).fetchall()
        except StoreError:
            if cancel is not None and cancel.is_set():
                raise SearchCancelled("candidate search was cancelled") from None
            raise
        return [
            CandidateRow(
                _from_id(sid),
                _time(created),
                _joined(cwd, cwd_raw),
                _joined(title, title_raw),
                _time(active),
                snippet,
                score,
            )
            for sid, created, cwd, cwd_raw, title, title_raw, active, snippet, score in rows
        ]

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """Header, last seq and the current surface events (log form), in one read transaction."""
        with self._read() as conn:
            rows = conn.execute(_SURFACE_LINES, (_id(session_id),))
            header_text, next_seq = self._session_row(conn, session_id, "header, next_seq")
            lines = rows.fetchall()
        return surface_snapshot(header_text, session_id, next_seq, lines)

    def read_surface_texts(self, session_ids: Sequence[str]) -> list[SurfaceTexts]:
        """Header, last seq and each surface node's `SurfaceText` of several sessions, in order.

        One read transaction serves them all, so the sessions are observed at the same instant.
        """
        with self._read() as conn:
            return [self._surface_texts(conn, session_id) for session_id in session_ids]

    def _surface_texts(self, conn: psycopg.Connection, session_id: str) -> SurfaceTexts:
        rows = conn.execute(_SURFACE_TEXTS, (_id(session_id),))
        header_text, next_seq, raw_text = self._session_row(conn, session_id, "header, next_seq, raw_surface_text")
        if raw_text:
            texts = [SurfaceText(*fields) if raw is None else _surface_text(raw) for *fields, raw in rows.fetchall()]
        else:
            texts = [SurfaceText._make(fields) for *fields, _ in rows.fetchall()]
        return surface_texts(header_text, session_id, next_seq, texts)

    def read_lines(self, session_id: str) -> tuple[SessionHeader, list[str]]:
        """The header and every event line of a session, in seq order, in one read transaction."""
        with self._read() as conn:
            rows = conn.execute(_LINES, (_id(session_id),))
            (header_text,) = self._session_row(conn, session_id, "header")
            lines = rows.fetchall()
        return header_from_row(header_text, session_id), [line for (line,) in lines]

    def read_events(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        header, lines = self.read_lines(session_id)
        return header, [event_from_json(json.loads(line), expected_seq=i) for i, line in enumerate(lines)]


@contextlib.contextmanager
def _cancelling(conn: psycopg.Connection, cancel: threading.Event | None) -> Iterator[None]:
    """Cancel the connection's running statement as soon as `cancel` is set (from a watcher thread)."""
    if cancel is None:
        yield
        return
    done = threading.Event()
    lock = threading.Lock()

    def watch() -> None:
        # Cancel again every 50 ms until the statement ends: a cancel that reaches the server
        # before the statement does is ignored, and the search would then run to its end.
        while not done.is_set():
            if cancel.wait(0.05):
                with lock:  # never cancel a statement of whoever has the connection next
                    if not done.is_set():
                        conn.cancel_safe()
                done.wait(0.05)

    threading.Thread(target=watch, name="dsh-search-cancel", daemon=True).start()
    try:
        yield
    finally:
        with lock:
            done.set()


def _taken(session_id: str) -> StoreError:
    # Stored meanwhile by another writer, or by a role this one cannot see: ids are unique across
    # the database.
    return StoreError(f"session {session_id!r} already exists (another writer created it); nothing was written")


def _quoted_role(role: str) -> str:
    """A role name as regrole input (quoted, so case and punctuation are kept)."""
    return '"' + role.replace('"', '""') + '"'
