"""Every reference log imports, exports equal to its input, and folds to the expected surface, on
every store (SQLite and PostgreSQL).

The logs (the `reference_logs` corpus of tests/conftest.py) were written by the reference
implementation's own tests and carry event types this project never writes (approvals, hooks, todo lists,
code-mode dispatches, tool-result rewrites); the store keeps them exactly and ignores them.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from dsh_host.cli.main import main
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import event_from_json
from dsh_host.session.surface import SURFACE_TYPES, fold
from tests.store_backends import BACKENDS, make_backend, store_config


def naive_surface(raws: list[dict]) -> list[int]:
    """The surface fold (append adds a node; replace swaps a run of current nodes for one), written
    plainly and independently of dsh_host.session.surface."""
    nodes: list[int] = []
    for raw in raws:
        op = raw.get("surfaceOp")
        if raw["type"] not in SURFACE_TYPES:
            assert op is None and "sourceEventSeqs" not in raw
        elif op == "append":
            nodes.append(raw["seq"])
        else:
            lo, hi = nodes.index(op["start"]), nodes.index(op["end"])
            assert lo <= hi and set(nodes[lo : hi + 1]) <= set(raw["sourceEventSeqs"])
            nodes[lo : hi + 1] = [raw["seq"]]
    return nodes


@pytest.fixture(scope="module", params=BACKENDS)
def imported(request, reference_logs, tmp_path_factory):
    """All reference logs imported with one `dsh sessions import` into a fresh store of each kind.

    Returns the configuration file that selects that store.
    """
    home = tmp_path_factory.mktemp("reference-home")
    config = store_config(home / "dsh.toml", make_backend(request.param, home, request))
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DSH_HOME", raising=False)
        mp.delenv("DSH_LOAD_PLUGINS", raising=False)
        mp.delenv("DSH_CONFIG", raising=False)
        mp.chdir(home)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--config", str(config), "sessions", "import", *map(str, reference_logs)])
    assert code == 0, err.getvalue()
    assert err.getvalue() == ""
    assert len(out.getvalue().splitlines()) == len(reference_logs)
    return config


def test_there_are_80_reference_logs(reference_logs):
    assert len(reference_logs) == 80


def test_reference_log_round_trips_and_folds(imported, reference_log, tmp_path, monkeypatch):
    monkeypatch.delenv("DSH_HOME", raising=False)
    monkeypatch.delenv("DSH_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("DSH_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    source_lines = reference_log.read_text("utf-8").splitlines()
    source = [json.loads(line) for line in source_lines]
    session_id = source[0]["id"]

    exported = tmp_path / "out.jsonl"
    assert main(["--config", str(imported), "sessions", "export", session_id, "-o", str(exported)]) == 0
    text = exported.read_text("utf-8")
    assert text.endswith("\n")
    out_lines = text.splitlines()
    out = [json.loads(line) for line in out_lines]

    # The header line always carries delegationDepth (required on disk, read as 0 when absent);
    # four reference headers predate that and omit it, so compare with it filled in.
    expected_header = {**source[0], "delegationDepth": source[0].get("delegationDepth", 0)}
    assert out[0] == expected_header
    assert list(out[0]) == ["type", "version", "id", "createdAt", "cwd", "delegationDepth"]
    assert out[1:] == source[1:]  # every event equal as JSON, in order
    # Byte for byte too, except where the reference wrote surfaceOp before sourceEventSeqs
    # (its crash-repair closers do); this host writes sourceEventSeqs first. Key order is free.
    for ours, theirs in zip(out_lines[1:], source_lines[1:], strict=True):
        if ours != theirs:
            keys = list(json.loads(theirs))
            assert keys.index("surfaceOp") < keys.index("sourceEventSeqs"), theirs

    events = [event_from_json(raw, expected_seq=i) for i, raw in enumerate(source[1:])]
    nodes = list(fold(events).nodes)
    assert nodes == naive_surface(source[1:])
    with Host.start(load_config(imported, env={}, cwd=tmp_path)) as host:
        surface = host.store.read_surface(session_id)
        assert [e["seq"] for e in surface.events] == nodes
        assert surface.events == [source[1 + seq] for seq in nodes]
        assert surface.captured_through_seq == (len(events) - 1 if events else None)
        assert surface.header.id == session_id and surface.header.cwd == source[0]["cwd"]


def test_reference_logs_carry_types_this_host_never_writes(reference_logs):
    """A guard that the fixtures still exercise foreign event types (they hold no replaces:
    the surface tests cover those)."""
    types: set[str] = set()
    for path in reference_logs:
        types.update(json.loads(line)["type"] for line in path.read_text("utf-8").splitlines()[1:])
    assert {"todo/write", "hook/invoked", "approval/asked", "tool/code-dispatch"} <= types
    assert {"session/title", "tool/call", "tool/result", "steering/message", "prompt/blocked"} <= types
