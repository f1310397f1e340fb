"""PostgresSessionStore beyond the store contract: team visibility by row-level security, roles it
refuses, the schema's life (`init_schema`), connection errors, and two hosts racing on a session."""

from __future__ import annotations

import threading

import psycopg
import pytest

from dsh_host.errors import ConfigError
from dsh_host.session.events import SessionHeader
from dsh_host.store import rows
from dsh_host.store.base import SessionBusy, SessionNotFound, StoreError
from dsh_host.store.postgres import (
    SCHEMA_VERSION,
    PostgresSessionStore,
    StoreUnavailable,
    connection_settings,
    init_schema,
)


@pytest.fixture
def team(postgres_server, postgres_database):
    """alice and bob in group `team`, carol outside it, each with a store on one database."""
    group = postgres_server.role("team", login=False)
    names = {
        "alice": postgres_server.role("alice", member_of=(group,)),
        "bob": postgres_server.role("bob", member_of=(group,)),
        "carol": postgres_server.role("carol"),
    }
    stores = {who: postgres_database.open(role) for who, role in names.items()}
    yield group, names, stores
    for store in stores.values():
        store.close()


def _log(L, text="hello"):
    return L.events([L.raw("turn/start", 0), L.user(1, text), L.raw("turn/end", 2)])


def _reads(store, session_id):
    """Every read of one session, as what it returned or the error it raised (type and text)."""
    out = []
    for read in (store.read_surface, store.read_lines, store.read_header, store.read_title, store.read_events):
        try:
            out.append(("ok", type(read(session_id)).__name__))
        except SessionNotFound as exc:
            out.append((type(exc).__name__, str(exc)))
    try:
        store.read_surface_texts([session_id])
        out.append(("ok", "texts"))
    except SessionNotFound as exc:
        out.append((type(exc).__name__, str(exc)))
    return out


# -- team visibility ------------------------------------------------------------------------------


def test_a_private_session_is_invisible_and_reads_exactly_like_a_missing_one(team, log_builder):
    _, _, stores = team
    stores["alice"].append(SessionHeader(id="mine", created_at=1, cwd="/a"), _log(log_builder))
    for who in ("bob", "carol"):
        other = stores[who]
        assert other.list_sessions() == []
        assert not other.has("mine")
        assert _reads(other, "mine") == [(kind, text.replace("ghost", "mine")) for kind, text in _reads(other, "ghost")]
        assert all(kind == "SessionNotFound" for kind, _ in _reads(other, "mine"))
    assert [r.id for r in stores["alice"].list_sessions()] == ["mine"]


def test_sharing_lets_the_group_read_and_only_the_owner_change(team, log_builder):
    group, names, stores = team
    alice, bob, carol = stores["alice"], stores["bob"], stores["carol"]
    header = SessionHeader(id="shared", created_at=1, cwd="/a")
    alice.append(header, _log(log_builder))
    alice.share("shared", group)
    assert alice.sharing("shared") == bob.sharing("shared") == (names["alice"], group)
    assert [r.id for r in bob.list_sessions()] == ["shared"]
    assert bob.read_lines("shared") == alice.read_lines("shared")
    assert bob.read_surface("shared") == alice.read_surface("shared")
    assert carol.list_sessions() == [] and not carol.has("shared")

    before = alice.read_lines("shared")
    read_only = f"shared with you read-only; only its owner {names['alice']!r} can change it"
    with pytest.raises(StoreError, match=read_only):
        bob.append(header, log_builder.events([log_builder.user(3)]))
    with pytest.raises(StoreError, match=read_only):
        bob.import_log(header, _log(log_builder, "over"), replace=True)
    with pytest.raises(StoreError, match=read_only):
        bob.delete("shared")
    with pytest.raises(StoreError, match=read_only):
        bob.share("shared", None)
    assert alice.read_lines("shared") == before

    alice.share("shared", None)
    assert bob.list_sessions() == [] and not bob.has("shared")
    assert alice.sharing("shared") == (names["alice"], None)


def test_pages_show_a_role_what_it_may_read_and_nothing_else(team, log_builder):
    group, _, stores = team
    alice, bob, carol = stores["alice"], stores["bob"], stores["carol"]
    alice.append(SessionHeader(id="private", created_at=1, cwd="/secret"), _log(log_builder))
    alice.append(SessionHeader(id="shared", created_at=2, cwd="/team"), _log(log_builder))
    alice.share("shared", group)
    bob.append(SessionHeader(id="bobs", created_at=3, cwd="/team"), _log(log_builder))
    # Every event at time 0: the ties go by id.
    assert [r.id for r in alice.list_sessions_by_activity(10)] == ["private", "shared"]
    assert [r.id for r in bob.list_sessions_by_activity(10)] == ["bobs", "shared"]
    assert [r.id for r in bob.list_sessions_by_activity(10, cwd="/secret")] == []
    assert carol.list_sessions_by_activity(10) == [] and carol.list_cwds() == []
    assert sorted(alice.list_cwds()) == ["/secret", "/team"] and bob.list_cwds() == ["/team"]
    assert bob.read_surface_page("shared", None, 5) == alice.read_surface_page("shared", None, 5)
    assert bob.read_events_page("shared", None, 5) == alice.read_events_page("shared", None, 5)
    for read in (bob.read_surface_page, bob.read_events_page):
        with pytest.raises(SessionNotFound, match='session "private" not found'):
            read("private", None, 5)


def test_sharing_names_an_existing_role_and_a_session_of_ones_own(team, log_builder):
    _, _, stores = team
    stores["alice"].append(SessionHeader(id="s", created_at=1), _log(log_builder))
    with pytest.raises(StoreError, match="role 'no such role' does not exist"):
        stores["alice"].share("s", "no such role")
    with pytest.raises(SessionNotFound):
        stores["bob"].share("s", None)  # invisible to bob: not found, not "read-only"
    with pytest.raises(SessionNotFound):
        stores["alice"].share("ghost", None)


def test_psql_shows_a_role_no_more_than_dsh_does(postgres_database, team, log_builder):
    group, names, stores = team
    stores["alice"].append(SessionHeader(id="private", created_at=1), _log(log_builder))
    stores["alice"].append(SessionHeader(id="shared", created_at=2), _log(log_builder))
    stores["alice"].share("shared", group)
    with psycopg.connect(postgres_database.dsn(names["bob"]), autocommit=True) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM dsh.{t}").fetchone()[0] for t in ("sessions", "events", "surface")
        ]
        assert counts == [1, 3, 1]
        (pk,) = conn.execute("SELECT pk FROM dsh.sessions").fetchone()
        for statement in (
            "INSERT INTO dsh.events (session_pk, seq, line) VALUES (%s, 9, '{}')",
            "INSERT INTO dsh.surface (session_pk, ord, seq, type, text) VALUES (%s, 9, 9, 'x', '')",
        ):
            for target in (pk, pk + 1000):  # a session shared with bob, one that does not exist
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="session this role does not own"):
                    conn.execute(statement, (target,))
        assert conn.execute("DELETE FROM dsh.events WHERE session_pk = %s", (pk,)).rowcount == 0
        assert conn.execute("UPDATE dsh.sessions SET title = 'x' WHERE pk = %s", (pk,)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE dsh.events SET line = '{}'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE dsh.sessions SET owner = current_user")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO dsh.sessions (id, owner, created_at, header, next_seq, next_ord) "
                "VALUES ('x', %s, 0, '{}', 0, 0)",
                (names["alice"],),
            )
    assert stores["alice"].read_lines("shared") == stores["bob"].read_lines("shared")


def test_rows_added_in_one_statement_must_all_be_of_sessions_one_owns(postgres_database, team, log_builder):
    _, names, stores = team
    for who, session_id in (("alice", "a"), ("bob", "b1"), ("bob", "b2")):
        stores[who].append(SessionHeader(id=session_id, created_at=1), _log(log_builder))
    with psycopg.connect(postgres_database.dsn(names["bob"]), autocommit=True) as conn:
        pks = dict(conn.execute("SELECT convert_from(id, 'UTF8'), pk FROM dsh.sessions").fetchall())
        with postgres_database.admin() as admin:
            pks["a"] = admin.execute("SELECT pk FROM dsh.sessions WHERE id = 'a'").fetchone()[0]
        insert = "INSERT INTO dsh.events (session_pk, seq, line) SELECT unnest(%s::bigint[]), 50, '{}'"
        for mixed in ([pks["b1"], pks["a"]], [pks["a"], pks["b2"]], [pks["b1"], pks["b2"], pks["a"] + 1000]):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="session this role does not own"):
                conn.execute(insert, (mixed,))
        assert conn.execute(insert, ([pks["b1"], pks["b2"]],)).rowcount == 2
    assert len(stores["alice"].read_lines("a")[1]) == 3


def test_a_taken_id_of_an_invisible_session_is_refused_without_writing(team, log_builder):
    _, _, stores = team
    stores["alice"].append(SessionHeader(id="s", created_at=1), _log(log_builder))
    # The words any refused id gets: nothing says that a session of that id exists.
    with pytest.raises(StoreError) as refused:
        stores["bob"].append(SessionHeader(id="s", created_at=1), _log(log_builder))
    assert str(refused.value) == 'session id "s" is not available'
    with pytest.raises(StoreError) as refused_import:
        stores["bob"].import_log(SessionHeader(id="s", created_at=1), _log(log_builder))
    assert str(refused_import.value) == 'session id "s" is not available'
    assert stores["bob"].list_sessions() == []
    assert len(stores["alice"].read_lines("s")[1]) == 3


# -- writes ------------------------------------------------------------------------------------------


def test_a_batch_is_split_into_rows_by_the_server_and_a_line_holding_a_newline_writes_nothing(
    postgres_database, log_builder, monkeypatch
):
    # A batch's lines travel as one newline-joined text: a line that held a raw newline would
    # come apart into rows of seqs that are not its own, so such a batch is refused whole.
    L = log_builder
    store = postgres_database.open()
    try:
        header = SessionHeader(id="s", created_at=0)
        store.append(header, L.events([L.user(0), L.raw("custom/x", 1)]))
        later = L.events([L.raw("custom/x", 2), L.raw("custom/x", 3), L.raw("custom/x", 4)])
        before = store.read_lines("s")
        lines = rows.Batch.lines
        monkeypatch.setattr(rows.Batch, "lines", lambda batch: [*lines(batch)[:-1], '{"a":\n1}'])
        with pytest.raises(StoreError) as refused:
            store.append(header, later)
        assert str(refused.value) == "session 's': a log line holds a raw newline; nothing was written"
        assert store.read_lines("s") == before
        monkeypatch.undo()
        store.append(header, later)
        assert store.read_lines("s")[1] == [*before[1], *(event.to_line() for event in later)]
    finally:
        store.close()


# -- roles it refuses -----------------------------------------------------------------------------


def test_it_refuses_a_superuser_and_a_role_that_bypasses_rls(postgres_server, postgres_database):
    with pytest.raises(StoreUnavailable, match="refusing to run as 'postgres', a superuser"):
        PostgresSessionStore.open(postgres_database.server.admin_dsn + f" dbname={postgres_database.name}")
    bypass = postgres_server.role("bypass", options="BYPASSRLS")
    with pytest.raises(StoreUnavailable, match="a role with BYPASSRLS") as info:
        postgres_database.open(bypass)
    assert info.value.exit_code == 2


# -- the schema -----------------------------------------------------------------------------------


def _catalog(database):
    """Every object of the dsh schema and the stored version: what init may not change twice."""
    with database.admin() as conn:
        objects = conn.execute(
            "SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'dsh' ORDER BY 1"
        ).fetchall()
        policies = conn.execute("SELECT tablename, policyname FROM pg_policies ORDER BY 1, 2").fetchall()
        version = conn.execute("SELECT value FROM dsh.meta").fetchall()
    return objects, policies, version


def test_init_is_idempotent_and_every_session_table_has_forced_rls(postgres_database):
    before = _catalog(postgres_database)
    assert init_schema(postgres_database.dsn(postgres_database.owner)) == (SCHEMA_VERSION, SCHEMA_VERSION)
    assert _catalog(postgres_database) == before
    objects, policies, version = before
    tables = {name: (rls, forced) for name, kind, rls, forced in objects if kind == "r"}
    assert tables == {
        "meta": (False, False),
        "sessions": (True, True),
        "events": (True, True),
        "surface": (True, True),
    }
    assert {t for t, _ in policies} == {"sessions", "events", "surface"}
    assert version == [(str(SCHEMA_VERSION),)]


def test_init_upgrades_a_version_1_database_keeping_its_sessions(postgres_server, log_builder):
    from dsh_host.store.postgres.schema import MIGRATIONS

    database = postgres_server.database()
    try:
        with database.admin() as conn:  # the database as the first dsh to ship this store left it
            conn.execute("DROP SCHEMA dsh CASCADE")
            conn.execute(f"SET ROLE {database.owner}")
            conn.execute("CREATE SCHEMA dsh")
            conn.execute(MIGRATIONS[0])
            conn.execute("INSERT INTO dsh.meta VALUES ('schema_version', '1')")
            conn.execute("RESET ROLE")
        with psycopg.connect(database.dsn(), autocommit=True) as conn:  # a session its user wrote then
            (pk,) = conn.execute(
                "INSERT INTO dsh.sessions (id, created_at, cwd, header, next_seq, next_ord, title, title_seq, "
                "title_time) VALUES ('old', 5, '/w', %s, 1, 1, 'Old Title', 0, 0) RETURNING pk",
                ('{"type":"session","version":0,"id":"old","createdAt":5,"cwd":"/w","delegationDepth":0}',),
            ).fetchone()
            line = log_builder.events([log_builder.user(0, "kept")])[0].to_line()
            conn.execute("INSERT INTO dsh.events VALUES (%s, 0, %s)", (pk, line))
            conn.execute(
                "INSERT INTO dsh.surface (session_pk, ord, seq, type, source_kind, text) "
                "VALUES (%s, 0, 0, 'user/message', 'user', 'kept')",
                (pk,),
            )
        with pytest.raises(StoreUnavailable, match="older than this dsh"):
            database.open()
        assert init_schema(database.dsn(database.owner)) == (1, SCHEMA_VERSION)
        store = database.open()
        try:
            # The last activity is the time of the session's last event (0 here, a test log's).
            assert store.list_sessions() == [("old", 5, "/w", "Old Title", 0)]
            found = store.search_candidates("old ti", target_id=None, target_cwd=None, limit=5)
            assert [row.id for row in found] == ["old"]
            store.append(SessionHeader(id="old", created_at=5, cwd="/w"), log_builder.events([log_builder.user(1)]))
            assert [e["seq"] for e in store.read_surface("old").events] == [0, 1]
        finally:
            store.close()
    finally:
        postgres_server.drop(database.name)


def as_version(database, version: int) -> None:
    """Make the database's dsh schema the one `version` created, empty."""
    from dsh_host.store.postgres.schema import MIGRATIONS

    with database.admin() as conn:
        conn.execute("DROP SCHEMA dsh CASCADE")
        conn.execute(f"SET ROLE {database.owner}")
        conn.execute("CREATE SCHEMA dsh")
        for migration in MIGRATIONS[:version]:
            conn.execute(migration)
        conn.execute("INSERT INTO dsh.meta VALUES ('schema_version', %s)", (str(version),))
        conn.execute("RESET ROLE")


def test_init_gives_a_version_4_database_every_sessions_last_activity(postgres_server, log_builder):
    L = log_builder
    database = postgres_server.database()
    other = postgres_server.role("other")
    try:
        as_version(database, 4)
        # Sessions of two roles, written as version 4 wrote them: no last activity column.
        for role, session_id, created, times in (
            (database.user, "mine", 5, [10, 30, 20]),  # the last event's time, not the latest
            (other, "theirs", 6, [40]),  # a role the upgrade cannot see as: filled all the same
            (database.user, "empty", 7, []),  # no event: its creation time
            (database.user, "broken", 8, [50]),  # an unreadable last line: its creation time too
        ):
            with psycopg.connect(database.dsn(role), autocommit=True) as conn:
                header = f'{{"type":"session","version":0,"id":"{session_id}","createdAt":{created}}}'
                (pk,) = conn.execute(
                    "INSERT INTO dsh.sessions (id, created_at, header, next_seq, next_ord) "
                    "VALUES (%s, %s, %s, %s, 0) RETURNING pk",
                    (session_id.encode(), created, header, len(times)),
                ).fetchone()
                lines = [L.events([L.raw("turn/start", seq, time=t)])[0].to_line() for seq, t in enumerate(times)]
                if session_id == "broken":
                    lines[-1] = "{corrupt"
                for seq, line in enumerate(lines):
                    conn.execute("INSERT INTO dsh.events VALUES (%s, %s, %s)", (pk, seq, line))
        with pytest.raises(StoreUnavailable, match="older than this dsh"):
            database.open()
        assert init_schema(database.dsn(database.owner)) == (4, SCHEMA_VERSION)
        for role, expected in ((database.user, {"broken": 8, "empty": 7, "mine": 20}), (other, {"theirs": 40})):
            store = database.open(role)
            try:
                assert {row.id: row.last_activity_at for row in store.list_sessions()} == expected
            finally:
                store.close()
        store = database.open()
        try:  # the column is written from now on
            store.append(SessionHeader(id="empty", created_at=7), L.events([L.raw("turn/start", 0, time=60)]))
            assert store.list_sessions_page(1) == [("broken", 8, None, None, 8)]
            assert store.list_sessions_page(1, (8, "broken")) == [("empty", 7, None, None, 60)]
        finally:
            store.close()
    finally:
        postgres_server.drop(database.name)


def _store_behind_proxy(postgres_server, postgres_database):
    """A store of the database's role that reaches the server through a loopback proxy (one that can cut it)."""
    from psycopg import conninfo

    from tests.proxy import Proxy

    proxy = Proxy(postgres_server.host_port)
    dsn = postgres_database.dsn()
    role = conninfo.conninfo_to_dict(dsn)["user"]
    (password,) = [
        line.rsplit(":", 1)[1] for line in postgres_server.pgpass.read_text().splitlines() if f":{role}:" in line
    ]
    with postgres_server.pgpass.open("a") as fh:
        fh.write(f"127.0.0.1:{proxy.port}:*:{role}:{password}\n")
    store = PostgresSessionStore.open(conninfo.make_conninfo(dsn, host="127.0.0.1", port=proxy.port))
    return proxy, store


def test_once_the_server_is_back_the_next_read_works_however_many_connections_went_stale(
    postgres_server, postgres_database
):
    from concurrent.futures import ThreadPoolExecutor

    proxy, store = _store_behind_proxy(postgres_server, postgres_database)
    try:
        store.import_log(SessionHeader(id="s", created_at=0), [])
        with ThreadPoolExecutor(8) as pool:  # several pooled connections, all of which the outage kills
            while store._pool._pool.get_stats()["pool_size"] < 3:
                list(pool.map(lambda _: store.read_surface_texts(["s"]), range(32)))
        proxy.cut()
        with pytest.raises(StoreError, match="PostgreSQL store: "):
            store.list_sessions()
        proxy.restore()
        assert [row.id for row in store.list_sessions()] == ["s"]
    finally:
        store.close()
        proxy.cut()


def _backends(database) -> set[int]:
    with database.admin() as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return {pid for (pid,) in rows}


def test_a_released_lease_hands_its_connection_to_the_next_lease(postgres_database):
    store = postgres_database.open()
    try:
        store.list_sessions()  # the pool's connection is up
        store.lease("s0").release()
        connected = _backends(postgres_database)
        for n in range(1, 6):  # a host driving one new session after another
            store.lease(f"s{n}").release()
            store.lease(f"s{n}").release()  # released for real: anyone may take it at once
        assert _backends(postgres_database) == connected
    finally:
        store.close()


def test_a_kept_lease_connection_the_server_dropped_is_replaced_by_a_new_one(postgres_server, postgres_database):
    proxy, store = _store_behind_proxy(postgres_server, postgres_database)
    try:
        store.lease("s").release()  # its connection is kept for the next lease
        proxy.cut()
        proxy.restore()
        lease = store.lease("s")
        with pytest.raises(SessionBusy):
            store.lease("s")
        lease.release()
    finally:
        store.close()
        proxy.cut()


def test_an_ordinary_role_cannot_init_and_nothing_is_created(postgres_server):
    database = postgres_server.database()
    try:
        with database.admin() as conn:
            conn.execute("DROP SCHEMA dsh CASCADE")
        with pytest.raises(StoreUnavailable, match=r"dsh store init failed: .*permission denied") as info:
            init_schema(database.dsn())
        assert "\n" not in str(info.value)
        with database.admin() as conn:
            assert conn.execute("SELECT to_regnamespace('dsh')").fetchone()[0] is None
    finally:
        postgres_server.drop(database.name)


def test_a_database_without_the_schema_is_refused_untouched(postgres_server):
    database = postgres_server.database()
    try:
        with database.admin() as conn:
            conn.execute("DROP SCHEMA dsh CASCADE")
        with pytest.raises(StoreUnavailable, match="has no dsh schema; run `dsh store init`"):
            database.open()
        with database.admin() as conn:
            assert conn.execute("SELECT to_regnamespace('dsh')").fetchone()[0] is None
    finally:
        postgres_server.drop(database.name)


@pytest.mark.parametrize(("version", "message"), [(SCHEMA_VERSION + 1, "newer than this dsh"), (0, "older than")])
def test_a_schema_of_another_version_is_refused_untouched(postgres_database, version, message):
    with postgres_database.admin() as conn:
        conn.execute("UPDATE dsh.meta SET value = %s", (str(version),))
    with pytest.raises(StoreUnavailable, match=message):
        postgres_database.open()
    if version > SCHEMA_VERSION:
        with pytest.raises(StoreUnavailable, match="newer than this dsh"):
            init_schema(postgres_database.dsn(postgres_database.owner))
    with postgres_database.admin() as conn:
        assert conn.execute("SELECT value FROM dsh.meta").fetchall() == [(str(version),)]


# -- connecting -----------------------------------------------------------------------------------


def test_connection_failures_are_one_line_naming_the_cause(postgres_database, monkeypatch):
    with pytest.raises(StoreUnavailable, match=r"cannot connect: .*Connection refused") as refused:
        PostgresSessionStore.open("host=127.0.0.1 port=1 dbname=x user=x")
    with pytest.raises(StoreUnavailable, match=r"cannot connect: .*no password supplied"):
        PostgresSessionStore.open(postgres_database.dsn("nobody_at_all"))
    with pytest.raises(StoreUnavailable, match=r"cannot connect: .*does not exist"):
        PostgresSessionStore.open(postgres_database.server.dsn("no_such_database", postgres_database.user))
    with pytest.raises(StoreUnavailable, match="invalid dsn"):
        PostgresSessionStore.open("host=127.0.0.1 port")
    assert "\n" not in str(refused.value) and refused.value.exit_code == 2
    monkeypatch.setenv("PGPASSWORD", "wrong")  # libpq takes PGPASSWORD before the pgpass file
    with pytest.raises(StoreUnavailable, match=r"cannot connect: .*password authentication failed"):
        postgres_database.open()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"dsn": "host=h user=u password=secret"}, "must not hold a password: set PGPASSWORD or use a pgpass"),
        ({"dsn": "postgresql://u:secret@h/db"}, "must not hold a password"),
        ({"dsn": "host=h port"}, "dsn is not valid"),
        ({"dsn": 5}, "dsn must be a string"),
        ({"dsn": "", "pool_size": 0}, "pool_size must be an integer"),
        ({"dsn": "", "statement_timeout_ms": -1}, "statement_timeout_ms must be an integer"),
        ({"dsn": "", "password": "x"}, "unknown key 'password'"),
    ],
)
def test_bad_settings_are_config_errors(table, message):
    with pytest.raises(ConfigError, match=message):
        connection_settings(table)


def test_settings_default_and_apply(postgres_database):
    assert connection_settings({"dsn": "dbname=x"}) == ("dbname=x", 4, 30_000)
    store = PostgresSessionStore.from_table({"dsn": postgres_database.dsn(), "statement_timeout_ms": 1234})
    try:
        with store._pool.transaction() as conn:
            assert conn.execute("SHOW statement_timeout").fetchone() == ("1234ms",)
    finally:
        store.close()


# -- two hosts, one session -----------------------------------------------------------------------


def test_two_hosts_racing_on_one_session_never_duplicate_or_lose_an_event(postgres_database, log_builder):
    L = log_builder
    header = SessionHeader(id="raced", created_at=0)
    hosts = [postgres_database.open(), postgres_database.open()]
    hosts[0].append(header, L.events([L.user(0, "start")]))
    rounds, batch = 60, 5
    won = [[], []]
    conflicts = [0, 0]
    start = threading.Barrier(2)

    def write(i: int) -> None:
        store = hosts[i]
        start.wait()
        for r in range(rounds):
            seq = store.read_surface("raced").captured_through_seq + 1
            marker = f"host {i} round {r}"
            events = L.events([L.user(seq + k, f"{marker} #{k}") for k in range(batch)])
            try:
                store.append(header, events)
            except StoreError as exc:
                assert "store expects" in str(exc) or "conflict" in str(exc), exc
                conflicts[i] += 1
                continue
            won[i].append(marker)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        _, events = hosts[0].read_events("raced")
        texts = [e.data["content"][0]["text"] for e in events[1:]]
        assert len(texts) == len(set(texts)) == batch * (len(won[0]) + len(won[1]))
        # Each winning batch is whole and contiguous; no losing batch left a trace.
        for i in range(2):
            for marker in won[i]:
                at = texts.index(f"{marker} #0")
                assert texts[at : at + batch] == [f"{marker} #{k}" for k in range(batch)]
        assert {t.split(" #")[0] for t in texts} == {m for w in won for m in w}
        assert hosts[1].read_surface("raced").captured_through_seq == len(events) - 1
        print(f"race: {len(won[0])} + {len(won[1])} batches won, {sum(conflicts)} conflicts")
    finally:
        for store in hosts:
            store.close()


def test_init_gives_a_version_5_database_the_indexes_of_the_listing_by_activity(postgres_server, log_builder):
    L = log_builder
    database = postgres_server.database()
    try:
        as_version(database, 5)
        with psycopg.connect(database.dsn(), autocommit=True) as conn:  # a session as version 5 wrote it
            header = '{"type":"session","version":0,"id":"old","createdAt":5,"cwd":"/w"}'
            conn.execute(
                "INSERT INTO dsh.sessions (id, created_at, cwd, header, next_seq, next_ord, last_activity_at) "
                "VALUES ('old', 5, '/w', %s, 0, 0, 5)",
                (header,),
            )
        with pytest.raises(StoreUnavailable, match="older than this dsh"):
            database.open()
        assert init_schema(database.dsn(database.owner)) == (5, SCHEMA_VERSION)
        with database.admin() as conn:
            indexes = {name for (name,) in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'dsh'")}
        assert {"sessions_by_activity", "sessions_by_cwd"} <= indexes
        store = database.open()
        try:
            store.append(SessionHeader(id="new", created_at=1, cwd="/w"), L.events([L.raw("turn/start", 0, time=9)]))
            assert [(r.id, r.last_activity_at) for r in store.list_sessions_by_activity(5, cwd="/w")] == [
                ("new", 9),
                ("old", 5),
            ]
        finally:
            store.close()
    finally:
        postgres_server.drop(database.name)
