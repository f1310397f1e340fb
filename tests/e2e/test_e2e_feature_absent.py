"""A feature installed but not mounted changes nothing: byte-identical logs, mentions sent as typed.

The same two-turn conversation runs through `dsh run`'s turn runner (`cli/run.py`) on two hosts:
one where the plugin is installed but not named in the configuration, and one where it is not
installed at all (its entry point dropped from discovery). The logs, exported with
`dsh sessions export`, must match line by line once times, the random session id and the
header's creation time are normalised. A subprocess then shows that an unmounted plugin's code
is never even imported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_host import plugins
from dsh_host.cli.run import run_turn
from dsh_host.host import Host
from dsh_host.testing import HostFactory
from dsh_session_reference import format_mention
from tests.e2e.e2e_support import clean_env, ok, run_dsh

SOURCE = "source-session"
MENTION = format_mention(SOURCE, "Prev chat")
TIME = re.compile(r'"time":\d+')


def _store_source(host: Host) -> None:
    """The same small stored session in every data dir (fixed creation time)."""
    source = host.sessions.create("/workspace/source", SOURCE, created_at=1)
    source.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    content = [{"type": "text", "text": "remember the blue door"}]
    source.append("user/message", {"content": content, "source": {"kind": "user"}}, surface_op="append")
    source.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    host.store.append(source.header, source.pending)
    host.sessions.forget(SOURCE)


async def _conversation(make_host: HostFactory, data_dir: Path, load: str, first: str, second: str) -> tuple[str, str]:
    """Two `dsh run` turns (the second continues the session); returns (session id, stdout)."""
    out: list[str] = []
    host = make_host([name for name in load.split(",") if name], data_dir=data_dir)
    try:
        _store_source(host)
        session = await run_turn(host, first, session_id=None, as_json=False, echo=out.append)
        await run_turn(host, second, session_id=session.id, as_json=False, echo=out.append)
    finally:
        host.close()
    return session.id, "".join(out)


def _export(tmp_path: Path, data_dir: Path, session_id: str) -> list[str]:
    env = clean_env(tmp_path, DSH_HOME=str(data_dir), DSH_LOAD_PLUGINS="")
    return ok(run_dsh(["sessions", "export", session_id], env=env, cwd=tmp_path)).stdout.splitlines()


def _normalised(lines: list[str], session_id: str) -> list[str]:
    header = json.loads(lines[0])
    assert header["type"] == "session" and header["id"] == session_id
    header.update(id="SESSION", createdAt=0)
    events = [TIME.sub('"time":0', line) for line in lines[1:]]
    assert all(session_id not in line for line in events)
    return [json.dumps(header, separators=(",", ":")), *events]


def _without(name: str, real: Callable[[], dict]) -> Callable[[], dict]:
    def discover() -> dict:
        found = dict(real())
        assert name in found, f"{name} should be installed in the test environment"
        del found[name]
        return found

    return discover


CASES = {
    # session-reference unmounted: mentions, even an invalid bare URI, are plain text.
    "session-reference": (
        "fs-read,compact",
        f"compare {MENTION} with dsh-session:IiJ please",
    ),
    # compact unmounted: references still work (they need only compact's marker constant).
    "compact": ("fs-read,session-reference", f"what did {MENTION} say?"),
}


@pytest.mark.parametrize("absent", sorted(CASES))
async def test_installed_but_not_mounted_writes_identical_logs(
    absent: str, make_host: HostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load, first = CASES[absent]
    second = "and one more thing"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)

    installed_dir = tmp_path / "installed"
    installed_id, installed_out = await _conversation(make_host, installed_dir, load, first, second)
    with monkeypatch.context() as patch:
        patch.setattr(plugins, "discover", _without(absent, plugins.discover))
        absent_dir = tmp_path / "absent"
        absent_id, absent_out = await _conversation(make_host, absent_dir, load, first, second)
    assert installed_id != absent_id

    installed_lines = _export(tmp_path, installed_dir, installed_id)
    absent_lines = _export(tmp_path, absent_dir, absent_id)
    assert len(installed_lines) == len(absent_lines)
    for index, (a, b) in enumerate(
        zip(_normalised(installed_lines, installed_id), _normalised(absent_lines, absent_id), strict=True)
    ):
        assert a == b, f"line {index} differs:\n installed: {a}\n absent:    {b}"
    assert installed_out == absent_out

    events = [json.loads(line) for line in installed_lines[1:]]
    users = [e["data"] for e in events if e["type"] == "user/message"]
    shown = first if absent == "session-reference" else first.replace(MENTION, "@Prev chat")
    assert [u["content"][-1]["text"] for u in users] == [shown, second]
    assert not [e for e in events if e["type"] == "context/message"]
    if absent == "session-reference":
        # Sent exactly as typed: markup kept, no envelope, no snapshot.
        assert users[0] == {"content": [{"type": "text", "text": first}], "source": {"kind": "user"}}
        assert "Scripted reply: compare @[Prev chat](dsh-session:" in installed_out
    else:
        # Prepared: the mention became its label, and the snapshot rides in the same message.
        assert users[0]["envelope"]["prefixContexts"][0]["meta"]["references"][0]["sessionId"] == SOURCE
        assert "remember the blue door" in users[0]["content"][0]["text"]
    assert "envelope" not in users[1]


def test_an_unmounted_plugin_is_never_imported(tmp_path: Path) -> None:
    """`dsh run` with a mention, only fs-read mounted: no module of the features it leaves out
    (references, compaction, other agents' sessions) is loaded."""
    probe = (
        "import sys\n"
        "from dsh_host.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "features = ('dsh_session_reference', 'dsh_compact', 'dsh_sources')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in features)\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = clean_env(tmp_path, DSH_HOME=str(tmp_path / "data"), DSH_LOAD_PLUGINS="fs-read")
    typed = f"see {MENTION}"
    done = ok(
        subprocess.run(
            [sys.executable, "-c", probe, "run", "--json", typed],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    )
    assert "LOADED []" in done.stderr, done.stderr
    user = next(e for e in map(json.loads, done.stdout.splitlines()) if e["type"] == "user/message")
    assert user["data"] == {"content": [{"type": "text", "text": typed}], "source": {"kind": "user"}}
