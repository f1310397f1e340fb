"""A live `opencode.db`: another process writes it in WAL mode, as OpenCode does, while `dsh` reads it.

The writer (a child process standing for OpenCode) holds the database open and commits one
exchange at a time when told to, or keeps a write transaction open. After each commit `dsh
sessions list|search|show` run, each a new command as a person would type it, and must see the
exchange just committed, while the folder holds exactly the files OpenCode made (nothing beside
them) and the database file itself is never changed by a read. A write still open neither makes
`dsh` wait nor shows. When the writer exits and takes its -wal and -shm with it, `dsh` still
reads everything and creates neither.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.foreign_logs

WRITER = """
import sys
from pathlib import Path

from bench.corpus.opencode import DatabaseWriter

db = DatabaseWriter(Path(sys.argv[1]))
db.conn.execute("PRAGMA wal_autocheckpoint = 0")  # the commits stay in the -wal, as between checkpoints
with db.transaction():
    sid = db.session("/work/live", "live session")
print("ready", sid, flush=True)
for line in sys.stdin:
    word = line.strip()
    if word == "hold":  # a write transaction left open until the next line, as a reply streams in
        with db.transaction():
            db.user(sid, "not committed yet")
            print("holding", flush=True)
            sys.stdin.readline()
        print("released", flush=True)
        continue
    with db.transaction():
        prompt = db.user(sid, "please handle " + word)
        db.assistant(sid, prompt, ("handled " + word,))
    print("committed", word, flush=True)
db.close()
"""


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    data = tmp_path / "xdg" / "opencode"
    data.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data / "opencode.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    ready = process.stdout.readline().split()
    assert ready[:1] == ["ready"], ready
    try:
        yield process, data, ready[1]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_dsh_sees_each_committed_message_of_a_running_opencode_and_creates_no_file(opencode_installed, writer, dsh_cli):
    process, data, session = writer
    assert process.stdin is not None and process.stdout is not None
    dsh_cli.plugins = ["opencode"]
    dsh_cli.env["XDG_DATA_HOME"] = str(data.parent)
    sid = f"opencode:{session}"
    made = sorted(os.listdir(data))
    assert made == ["opencode.db", "opencode.db-shm", "opencode.db-wal"]
    database = (data / "opencode.db").read_bytes()
    words = ["quillwort", "bramblefinch", "marrowgate"]
    for count, word in enumerate(words, 1):
        process.stdin.write(word + "\n")
        process.stdin.flush()
        assert process.stdout.readline().split() == ["committed", word]
        code, out, err = dsh_cli("sessions", "list", "--json")
        assert (code, err) == (0, "")
        assert [(row["id"], row["title"]) for row in map(json.loads, out.splitlines())] == [(sid, "live session")]
        code, out, err = dsh_cli("sessions", "search", word)
        assert code == 0 and out.splitlines()[0].startswith(sid) and word in out, (out, err)
        code, out, err = dsh_cli("sessions", "show", sid)
        assert code == 0, err
        assert [w for w in words if f"please handle {w}" in out and f"handled {w}" in out] == words[:count]
        assert sorted(os.listdir(data)) == made
    assert (data / "opencode.db").read_bytes() == database  # every commit is in the -wal: the file is as it was
    process.stdin.write("hold\n")
    process.stdin.flush()
    assert process.stdout.readline().split() == ["holding"]
    code, out, err = dsh_cli("sessions", "show", sid)  # OpenCode mid-write: dsh neither waits nor sees it
    assert code == 0 and "handled marrowgate" in out and "not committed yet" not in out, err
    process.stdin.write("release\n")
    process.stdin.flush()
    assert process.stdout.readline().split() == ["released"]
    code, out, err = dsh_cli("sessions", "show", sid)
    assert code == 0 and "not committed yet" in out, err
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    assert sorted(os.listdir(data)) == ["opencode.db"]  # OpenCode closed: it checkpointed and removed both
    code, out, err = dsh_cli("sessions", "show", sid)
    assert code == 0 and all(f"handled {w}" in out for w in words), err
    code, out, err = dsh_cli("sessions", "check")
    assert code == 0, (out, err)
    assert sorted(os.listdir(data)) == ["opencode.db"]
