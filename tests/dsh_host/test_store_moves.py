"""Moving sessions between stores: `dsh sessions export --all` and `dsh sessions import`.

A thousand sessions go from SQLite to PostgreSQL and back, and every export is the same bytes.
"""

from __future__ import annotations

import pytest

from dsh_host.cli.main import main
from dsh_host.session.events import SessionHeader
from dsh_host.session.jsonl import export_lines
from tests.store_backends import make_backend, store_config

# The logs are built by hand (some turnless, some empty), not written by dsh.
pytestmark = pytest.mark.foreign_logs

AWKWARD = ["nul \x00", "lone \ud800", "line\u2028sep", "😀", "", "quote\"'\\", "\x1b[31m"]


@pytest.fixture
def dsh(tmp_path, monkeypatch, capsys):
    """`dsh(config, *args)` in-process; returns (exit code, out, err)."""
    for name in ("DSH_CONFIG", "DSH_LOAD_PLUGINS", "DSH_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    def run(config, *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--config", str(config), *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def many_sessions(L, count: int):
    """`count` varied sessions: awkward ids and texts, tied and fractional times, titles, a
    compaction every so often, a few empty logs."""
    for i in range(count):
        awkward = AWKWARD[i % len(AWKWARD)]
        session_id = f"s{i:04d}" if i % 9 else f"s{i:04d} {awkward}"
        created = 1_700_000_000_000 + (i // 3) * 1000 + (0.5 if i % 11 == 0 else 0)  # ties by id, some floats
        header = SessionHeader(id=session_id, created_at=created, cwd=f"/w/{i % 5}" if i % 4 else None)
        if i % 97 == 0:
            yield header, []
            continue
        raws = [
            L.raw("turn/start", 0, {"turn": 1, "trigger": {"kind": "message", "source": L.USER}}),
            L.user(1, f"question {i} {awkward}"),
            L.chunk(2, "par"),
            L.assistant(3, f"answer {i}", sources=[2]),
            L.raw("session/title", 4, {"title": f"title {i} {awkward}", "messageSeqs": [1], "source": {"kind": "x"}}),
        ]
        if i % 5 == 0:
            raws.append(L.user(5, "summary", op=L.replace(1, 3), sources=[1, 3]))
        raws.append(L.raw("turn/end", len(raws), {"turn": 1, "reason": {"kind": "completed"}}))
        yield header, L.events(raws)


def test_a_thousand_sessions_move_sqlite_postgres_sqlite_byte_for_byte(dsh, tmp_path, request, log_builder):
    first = make_backend("sqlite", tmp_path / "first", request)
    store = first.open()
    for header, events in many_sessions(log_builder, 1000):
        store.import_log(header, events)
    store.close()
    configs = {
        "first": store_config(tmp_path / "first" / "dsh.toml", first),
        "postgres": store_config(tmp_path / "postgres.toml", make_backend("postgres", tmp_path / "pg", request)),
        "last": store_config(tmp_path / "last" / "dsh.toml", make_backend("sqlite", tmp_path / "last", request)),
    }
    exports = {}
    previous = None
    for name, config in configs.items():
        if previous is not None:
            code, out, err = dsh(config, "sessions", "import", str(exports[previous]))
            assert (code, err) == (0, ""), err[-500:]
            assert out.count("\n") == 1000  # (ids hold U+2028, which splitlines would break at)
        exports[name] = tmp_path / f"{name}.jsonl"
        assert dsh(config, "sessions", "export", "--all", "-o", str(exports[name])) == (0, "", "")
        previous = name
    data = {name: path.read_bytes() for name, path in exports.items()}
    assert data["first"].count(b'{"type":"session","version":0,') == 1000
    assert data["postgres"] == data["first"]
    assert data["last"] == data["first"]
    listings = {name: dsh(config, "sessions", "list", "--json")[1] for name, config in configs.items()}
    assert listings["postgres"] == listings["first"] == listings["last"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_export_all_and_import_of_several_logs(dsh, tmp_path, request, log_builder, backend):
    L = log_builder
    config = store_config(tmp_path / "dsh.toml", make_backend(backend, tmp_path, request))
    logs = list(many_sessions(L, 3))
    text = "".join("".join(export_lines(h, [e.to_line() for e in events])) for h, events in logs)
    (tmp_path / "all.jsonl").write_text(text, "utf-8")
    code, out, _ = dsh(config, "sessions", "import", str(tmp_path / "all.jsonl"))
    assert code == 0 and [line.split(" (")[1] for line in out.splitlines()] == [f"{len(e)} events)" for _, e in logs]
    code, out, _ = dsh(config, "sessions", "export", "--all")
    assert code == 0
    # Newest first; the export of every session is the concatenation of their exports.
    singles = [dsh(config, "sessions", "export", h.id)[1] for h, _ in sorted(logs, key=lambda x: -x[0].created_at)]
    assert out == "".join(singles)

    # One bad log in a file imports none of that file; a taken id fails only its own log.
    bad = text + '{"type":"session","version":0,"id":"late","createdAt":1}\n{"type":"x","seq":5,"time":0,"data":{}}\n'
    (tmp_path / "bad.jsonl").write_text(bad, "utf-8")
    code, out, err = dsh(config, "sessions", "import", "--replace", str(tmp_path / "bad.jsonl"))
    assert (code, out) == (1, "")
    assert f"bad.jsonl:{text.count(chr(10)) + 2}: session event seq 5 is not contiguous" in err
    fresh = '{"type":"session","version":0,"id":"new","createdAt":1}\n'
    (tmp_path / "taken.jsonl").write_text(text + fresh, "utf-8")
    code, out, err = dsh(config, "sessions", "import", str(tmp_path / "taken.jsonl"))
    assert code == 1 and out == "imported new (0 events)\n"
    assert err.count("already exists") == 3 and err.endswith("dsh: error: 1 of 1 file(s) not imported\n")


def test_export_needs_one_session_or_all(dsh, tmp_path, request):
    config = store_config(tmp_path / "dsh.toml", make_backend("sqlite", tmp_path, request))
    for args in ((), ("s", "--all")):
        code, out, err = dsh(config, "sessions", "export", *args)
        assert (code, out, err) == (2, "", "dsh: error: dsh sessions export: name one SESSION_ID or give --all\n")
