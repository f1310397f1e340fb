"""The PostgreSQL store's schema `dsh`: its migrations, creating and upgrading it, checking its version.

The schema is created and upgraded by `init_schema` (`dsh store init`, run as the database's
owner), never implicitly; a store refuses a database whose schema version is not its own.
"""

from __future__ import annotations

import psycopg

from dsh_host.store.codec import decode, folded, from_postgres
from dsh_host.store.postgres.pool import StoreUnavailable, connect, one_line
from dsh_host.store.search import searchable_condition

SCHEMA_VERSION = 6

# Each entry upgrades the schema from the version before it (entry 0 creates version 1). The
# statements run in `init_schema`'s single transaction.
MIGRATIONS: tuple[str, ...] = (
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
    """
-- The listing by last activity, of every session and of one cwd's, read in index order.
CREATE INDEX sessions_by_activity ON dsh.sessions (last_activity_at DESC, id);
CREATE INDEX sessions_by_cwd ON dsh.sessions (cwd, last_activity_at DESC, id);
""",
)
# Python steps of a migration, by the version it creates, run after its statements.
_FOLD_VERSION = 2
assert len(MIGRATIONS) == SCHEMA_VERSION


def schema_version(conn: psycopg.Connection) -> int | None:
    """The stored schema version, or None when the database has no dsh schema."""
    if conn.execute("SELECT to_regclass('dsh.meta')").fetchone()[0] is None:  # type: ignore[index]  # one row
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
                before = schema_version(conn)
                if before is not None and before > SCHEMA_VERSION:
                    raise StoreUnavailable(_newer(conn, before))
                start = before or 0
                if start == 0:
                    conn.execute("CREATE SCHEMA IF NOT EXISTS dsh")
                for migration in MIGRATIONS[start:]:
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
            raise StoreUnavailable(f"PostgreSQL store: dsh store init failed: {one_line(exc)}") from None
    return before, SCHEMA_VERSION


def check_version(conn: psycopg.Connection) -> None:
    """Refuse a database whose dsh schema is missing, older or newer than this store's."""
    version = schema_version(conn)
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


def _fold_stored_names(conn: psycopg.Connection) -> None:
    """Fill the folded names of every stored session, whoever owns it (during `init_schema`).

    Row-level security is forced even on the table's owner: lifted for this transaction only.
    """
    conn.execute("ALTER TABLE dsh.sessions NO FORCE ROW LEVEL SECURITY")
    rows = conn.execute("SELECT pk, id, cwd, cwd_raw, title, title_raw FROM dsh.sessions").fetchall()
    names = [
        (pk, folded(decode(sid)), folded(from_postgres(cwd, cwd_raw)), folded(from_postgres(title, title_raw)))
        for pk, sid, cwd, cwd_raw, title, title_raw in rows
    ]
    if names:
        conn.execute(
            "UPDATE dsh.sessions AS s SET id_folded = t.i, cwd_folded = t.c, title_folded = t.t "
            "FROM unnest(%s::bigint[], %s::bytea[], %s::bytea[], %s::bytea[]) AS t (pk, i, c, t) WHERE s.pk = t.pk",
            [list(column) for column in zip(*names, strict=True)],
        )
    conn.execute("ALTER TABLE dsh.sessions FORCE ROW LEVEL SECURITY")


def _newer(conn: psycopg.Connection, version: int) -> str:
    return (
        f"PostgreSQL store: database {conn.info.dbname!r} has dsh schema version {version}, newer than this dsh "
        f"supports ({SCHEMA_VERSION}); upgrade dsh to use it"
    )
