"""A read's record keys kept on disk instead of in memory, so a huge file costs no more memory than a small one.

Reading a transcript from its start, a projector needs every keyed record it has seen (Claude
Code's uuids: what a later record may point at, and the chain walked back from the leaf), and the
index keeps them afterwards. Held in memory that grows with the file. A `NodeSpill` is a temporary
SQLite file in the index's folder where the projector writes them as it goes; it walks the chain
there, marks each record's place on it, and hands the file to the index writer, which attaches it,
copies the rows into the index (`select_rows`) and removes it. Only the spill's path travels between processes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from dsh_host.files import private_folder

PREFIX = "spill-"
SUFFIX = ".sqlite3"

SpilledRow = tuple[str, "str | None", int, bool, bytes]
"""A spilled record: its key, the key it points at, its place in the file (record number), whether it
holds a message, and what the projector keeps of it (its own encoding: `marshal` of plain values)."""

_SCHEMA = """
CREATE TABLE n (idx INTEGER PRIMARY KEY, key TEXT NOT NULL, parent TEXT, says INTEGER NOT NULL, info BLOB NOT NULL);
CREATE TABLE placed (idx INTEGER PRIMARY KEY, at INTEGER NOT NULL, msgs INTEGER NOT NULL, blocks INTEGER NOT NULL);
"""
# From the leaf up its parents, each step to a record written before (an ordered file has no cycle).
_CHAIN = """
WITH RECURSIVE up(idx, parent) AS (
    SELECT idx, parent FROM n WHERE key = ?
    UNION ALL
    SELECT n.idx, n.parent FROM n JOIN up ON n.key = up.parent AND n.idx < up.idx
)
SELECT n.idx, n.key, n.parent, n.says, n.info FROM up JOIN n ON n.idx = up.idx ORDER BY up.idx
"""


class NodeSpill:
    """A temporary SQLite file of one read's keyed records (see the module docstring).

    Pickles as its path: a worker process writes it, the index writer opens it by that path.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._keyed = False

    @classmethod
    def create(cls, directory: Path) -> NodeSpill:
        """A new, empty spill in `directory` (made private if missing)."""
        private_folder(directory)
        fd, path = tempfile.mkstemp(prefix=f"{PREFIX}{os.getpid()}-", suffix=SUFFIX, dir=directory)
        os.close(fd)
        spill = cls(path)
        spill._open(schema=True)
        return spill

    def __getstate__(self) -> str:
        return self.path

    def __setstate__(self, state: str) -> None:
        self.path = state
        self._conn = None
        self._keyed = False

    def _open(self, *, schema: bool = False) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            # Scratch data: a crash loses the read, which starts again; no journal is worth its cost.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("PRAGMA cache_size = -4096")
            if schema:
                conn.executescript(_SCHEMA)
            conn.execute("BEGIN")
            self._conn = conn
        return self._conn

    def add(self, rows: Iterable[SpilledRow]) -> bool:
        """Write records; False when a key is already there (the file repeats a key), nothing written then.

        Until the keys are indexed (`index_keys`, which a lookup or the walk needs) a repeated key is
        not seen here: most records are spilled before anything is looked up, and writing them into
        an index of random keys cost more than sorting the keys once.
        """
        conn = self._open()
        conn.execute("SAVEPOINT batch")
        try:
            conn.executemany("INSERT INTO n (key, parent, idx, says, info) VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError:
            conn.execute("ROLLBACK TO batch")
            return False
        finally:
            conn.execute("RELEASE batch")
        return True

    def index_keys(self) -> bool:
        """Index the records by key (once); False when a key repeats, then nothing is indexed."""
        if not self._keyed:
            try:
                self._open().execute("CREATE UNIQUE INDEX IF NOT EXISTS n_key ON n (key)")
            except sqlite3.IntegrityError:
                return False
            self._keyed = True
        return True

    def has(self, key: str) -> bool:
        """Whether a record of this key was written (the keys are indexed: `index_keys` said True)."""
        return self._open().execute("SELECT 1 FROM n WHERE key = ?", (key,)).fetchone() is not None

    def chain(self, leaf: str) -> Iterator[SpilledRow]:
        """The records from the root (or a gap) down to `leaf`, in file order."""
        for idx, key, parent, says, info in self._open().execute(_CHAIN, (leaf,)):
            yield key, parent, idx, bool(says), info

    def everything(self) -> Iterator[SpilledRow]:
        """Every record, in file order."""
        rows = self._open().execute("SELECT idx, key, parent, says, info FROM n ORDER BY idx")
        for idx, key, parent, says, info in rows:
            yield key, parent, idx, bool(says), info

    def place(self, places: Iterable[tuple[int, int, int, int]]) -> None:
        """Mark records on the current chain: (record number, place on the chain, messages through it, blocks)."""
        self._open().executemany("INSERT OR REPLACE INTO placed (idx, at, msgs, blocks) VALUES (?, ?, ?, ?)", places)

    def finish(self) -> None:
        """Make what was written readable by another connection (the index writer's)."""
        if self._conn is not None:
            if self._conn.in_transaction:
                self._conn.execute("COMMIT")
            self._conn.close()
            self._conn = None

    def discard(self) -> None:
        """Remove the file (it was copied, or the read was abandoned)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def select_rows(schema: str) -> str:
    """A query of every record of a spill attached as `schema`, as the index keeps it: a file's pk (the
    query's one parameter), key, parent, whether it holds a message, place, messages and blocks.

    In key order, the index's own: its B-tree is then filled page after page. Run by the index's own
    connection, the rows go from one file to the other without a Python object each.
    """
    return (
        f"SELECT ?, n.key, n.parent, n.says, p.at, coalesce(p.msgs, 0), coalesce(p.blocks, 0) "
        f"FROM {schema}.n AS n LEFT JOIN {schema}.placed AS p ON p.idx = n.idx ORDER BY n.key"
    )


def sweep(directory: Path, alive: Callable[[int], bool]) -> None:
    """Remove the spills of processes that are gone (killed mid-read); `alive` says whether a pid runs."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(PREFIX) and name.endswith(SUFFIX):
            pid = name[len(PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(directory / name)
