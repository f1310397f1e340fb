"""`dsh` on PostgreSQL: `dsh store init`, errors that name their cause (exit 2, nothing written),
and two people sharing and referencing sessions (`dsh sessions share`, `dsh ref`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import dsh_host.store
from dsh_host.cli.main import main
from dsh_host.session.jsonl import export_lines
from dsh_host.store.postgres import SCHEMA_VERSION
from dsh_session_reference.mentions import format_mention


def write_config(path: Path, dsn: str, *, plugins: tuple[str, ...] = (), store: str = "postgres") -> Path:
    path.write_text(
        "[host]\n"
        f'store = "{store}"\n'
        f"plugins = {json.dumps(list(plugins))}\n"
        f'data_dir = "{path.parent / "data"}"\n'
        "[stores.postgres]\n"
        f'dsn = "{dsn}"\n',
        "utf-8",
    )
    return path


@pytest.fixture
def dsh(tmp_path, monkeypatch, capsys):
    """`dsh(config, *args)`: run dsh in-process with that config; returns (exit code, out, err)."""
    monkeypatch.delenv("DSH_CONFIG", raising=False)
    monkeypatch.delenv("DSH_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("DSH_HOME", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(config: Path, *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--config", str(config), *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _bare_database(postgres_server):
    """A fresh database without the dsh schema."""
    database = postgres_server.database()
    with database.admin() as conn:
        conn.execute("DROP SCHEMA dsh CASCADE")
    return database


def test_store_init_creates_then_finds_the_schema_up_to_date(postgres_server, dsh, tmp_path):
    database = _bare_database(postgres_server)
    try:
        user = write_config(tmp_path / "user.toml", database.dsn())
        code, out, err = dsh(user, "sessions", "list")
        assert (code, out) == (2, "")
        assert err == (
            f"dsh: error: PostgreSQL store: database {database.name!r} has no dsh schema; "
            "run `dsh store init` as the database's owner\n"
        )
        code, out, err = dsh(user, "store", "init")
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "dsh store init failed:" in err and "permission denied" in err

        owner = write_config(tmp_path / "owner.toml", database.dsn(database.owner))
        assert dsh(owner, "store", "init") == (
            0,
            f"dsh store init: created the dsh schema, version {SCHEMA_VERSION}\n",
            "",
        )
        assert dsh(user, "store", "init", "--dsn", database.dsn(database.owner)) == (
            0,
            f"dsh store init: the dsh schema is up to date (version {SCHEMA_VERSION})\n",
            "",
        )
        assert dsh(user, "sessions", "list") == (0, "", "")
    finally:
        postgres_server.drop(database.name)


def test_connection_problems_are_one_line_and_exit_2(postgres_database, dsh, tmp_path, log_builder):
    log = tmp_path / "in.jsonl"
    header = log_builder.header("s")
    log.write_text("".join(export_lines(header, [e.to_line() for e in log_builder.events([log_builder.user(0)])])))
    cases = {
        "host=127.0.0.1 port=1 dbname=x user=x": "PostgreSQL store: cannot connect: connection failed: ",
        "host=127.0.0.1 port": "[stores.postgres] dsn is not valid: ",
        "host=127.0.0.1 user=x password=secret": "[stores.postgres] dsn must not hold a password",
        postgres_database.server.admin_dsn.replace(" password=", " passfile=/nonexistent x=").split(" x=")[0]
        + f" dbname={postgres_database.name}": "PostgreSQL store: cannot connect: ",
    }
    for dsn, message in cases.items():
        config = write_config(tmp_path / "bad.toml", dsn)
        code, out, err = dsh(config, "sessions", "import", str(log))
        assert (code, out) == (2, ""), (dsn, err)
        assert err.startswith(f"dsh: error: {message}") and err.count("\n") == 1, (dsn, err)
    # The newer-schema refusal, and nothing was written by any of the attempts.
    with postgres_database.admin() as conn:
        conn.execute("UPDATE dsh.meta SET value = %s", (str(SCHEMA_VERSION + 1),))
    code, _, err = dsh(write_config(tmp_path / "ok.toml", postgres_database.dsn()), "sessions", "import", str(log))
    assert code == 2 and "newer than this dsh supports" in err
    with postgres_database.admin() as conn:
        assert conn.execute("SELECT count(*) FROM dsh.sessions").fetchone() == (0,)


def test_without_psycopg_the_store_and_its_commands_say_how_to_install_it(dsh, tmp_path, monkeypatch):
    # A host without the extra: importing psycopg fails, and so does the store's package.
    for name in [name for name in sys.modules if name == "psycopg" or name.startswith("dsh_host.store.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(dsh_host.store, "postgres", raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    config = write_config(tmp_path / "no-psycopg.toml", "dbname=x")
    for args in (("sessions", "list"), ("store", "init")):
        code, out, err = dsh(config, *args)
        assert (code, out) == (2, ""), (args, err)
        assert err.startswith("dsh: error: [host] store = \"postgres\" needs psycopg: pip install 'dsh-host[postgres]'")
        assert err.count("\n") == 1, err


def test_it_refuses_to_start_as_a_superuser(postgres_database, dsh, tmp_path):
    superuser = postgres_database.server.admin_dsn.split(" password=")[0] + f" dbname={postgres_database.name}"
    # The superuser's password comes from the pgpass file, as for anyone.
    host, port = postgres_database.server.host_port
    password = postgres_database.server.admin_dsn.split(" password=")[1].split()[0]
    with postgres_database.server.pgpass.open("a") as fh:
        fh.write(f"{host}:{port}:*:postgres:{password}\n")
    code, out, err = dsh(write_config(tmp_path / "su.toml", superuser), "sessions", "list")
    assert (code, out) == (2, "")
    assert err == (
        "dsh: error: PostgreSQL store: refusing to run as 'postgres', a superuser: row-level security would not "
        "apply; connect as an ordinary role\n"
    )


# -- two people -----------------------------------------------------------------------------------


@pytest.fixture
def two_people(postgres_server, postgres_database, tmp_path, dsh, log_builder):
    """alice and bob, members of one team role, each with a config and a session of their own."""
    L = log_builder
    team = postgres_server.role("team", login=False)
    people = {}
    for name in ("alice", "bob"):
        role = postgres_server.role(name, member_of=(team,))
        home = tmp_path / name
        home.mkdir()
        config = write_config(home / "dsh.toml", postgres_database.dsn(role), plugins=("session-reference",))
        for kind in ("private", "shared"):
            session_id = f"{name}-{kind}"
            events = L.events(
                [
                    L.raw("turn/start", 0, {"turn": 1, "trigger": {"kind": "message", "source": L.USER}}),
                    L.user(1, f"{name}'s {kind} notes: the cache key is the file hash"),
                    L.assistant(2, f"Noted, {name}."),
                    L.raw("turn/end", 3, {"turn": 1, "reason": {"kind": "completed"}}),
                ]
            )
            log = home / f"{kind}.jsonl"
            log.write_text("".join(export_lines(L.header(session_id, cwd="/team"), [e.to_line() for e in events])))
            assert dsh(config, "sessions", "import", str(log))[0] == 0
        people[name] = (role, config)
    return team, people


def test_sharing_makes_a_session_readable_by_the_team_and_nothing_else(two_people, dsh):
    team, people = two_people
    (_, alice), (_, bob) = people["alice"], people["bob"]
    assert dsh(alice, "sessions", "share", "alice-shared", team) == (
        0,
        f"shared alice-shared with {team} (read-only)\n",
        "",
    )
    listed = dsh(bob, "sessions", "list", "--json")[1].splitlines()
    assert sorted(json.loads(line)["id"] for line in listed) == ["alice-shared", "bob-private", "bob-shared"]
    assert dsh(bob, "sessions", "export", "alice-shared") == dsh(alice, "sessions", "export", "alice-shared")

    # A private session reads exactly like one that does not exist.
    for args in (("sessions", "show", "{}"), ("sessions", "export", "{}")):
        hidden = dsh(bob, *(a.format("alice-private") for a in args))
        missing = dsh(bob, *(a.format("no-such-session") for a in args))
        assert hidden == (missing[0], missing[1], missing[2].replace("no-such-session", "alice-private"))
        assert hidden[0] == 1

    code, _, err = dsh(bob, "sessions", "share", "alice-shared", team)
    assert code == 1 and "shared with you read-only" in err
    assert dsh(alice, "sessions", "unshare", "alice-shared") == (0, "alice-shared is private\n", "")
    assert "alice-shared" not in dsh(bob, "sessions", "list")[1]


def test_two_people_reference_each_others_shared_sessions(two_people, dsh):
    team, people = two_people
    (_, alice), (_, bob) = people["alice"], people["bob"]
    for person, config in (("alice", alice), ("bob", bob)):
        assert dsh(config, "sessions", "share", f"{person}-shared", team)[0] == 0

    for me, other, config in (("alice", "bob", alice), ("bob", "alice", bob)):
        code, out, err = dsh(config, "ref", "candidates", "--target", f"{me}-private", "--json")
        assert code == 0, err
        ids = {json.loads(line)["sessionId"] for line in out.splitlines()}
        assert f"{other}-shared" in ids and f"{other}-private" not in ids

        mention = f"what did you note? {format_mention(f'{other}-shared', 'notes')}"
        code, out, err = dsh(config, "ref", "preview", "--target", f"{me}-private", "--json", mention)
        assert code == 0, err
        prepared = json.loads(out)
        assert f"{other}'s shared notes: the cache key is the file hash" in json.dumps(prepared["contexts"])

        hidden = dsh(config, "ref", "preview", "--target", f"{me}-private", format_mention(f"{other}-private"))
        missing = dsh(config, "ref", "preview", "--target", f"{me}-private", format_mention("nobody-at-all"))
        assert hidden[0] != 0
        assert hidden == (missing[0], missing[1], missing[2].replace("nobody-at-all", f"{other}-private"))
