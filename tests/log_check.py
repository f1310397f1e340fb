"""The log check every test runs on the logs it wrote (`check_written_logs` in `tests/conftest.py`).

Every host a test starts keeps its store in `sessions.sqlite3` under its data dir, and tests put
data dirs under `tmp_path`; so after the test, every such store under `tmp_path` is opened and
each of its sessions is checked with `dsh_host.check_log` and the compaction bracket's rules.
Stores written by a subprocess (`dsh ...`) are checked the same way. The check is strict: a
log dsh writes must be resumable, so a note fails the test as a violation does.
"""

from __future__ import annotations

from pathlib import Path

from dsh_compact.invariant import check_compactions
from dsh_host.log import check_log
from dsh_host.store.base import StoreError
from dsh_host.store.sqlite import SqliteSessionStore

STORE_NAME = "sessions.sqlite3"
INVARIANTS = (check_compactions,)

# The reference logs whose events carry shapes from before provider routing (request headers and
# assistant provenance without a provider), with those events' seqs: the log check notes them.
PRE_PROVIDER = {
    "ref-scripts-python-sdk-single-exe-advanced-session": [3, 9, 14, 20, 31, 41, 51, 56, 62],
    "ref-scripts-python-sdk-single-exe-advanced-session-1": [3, 9],
    "ref-scripts-python-sdk-single-exe-advanced-session-2": [3, 9],
}


def store_violations(path: Path) -> list[str]:
    """One line per finding in the store at `path` (`<session> seq <n> <rule>: <message>`)."""
    try:
        store = SqliteSessionStore.open(path)
    except StoreError:
        return []  # a store a test corrupted on purpose holds no log to check
    try:
        lines = []
        for row in store.list_sessions():
            header, events = store.read_events(row.id)
            lines.extend(f"{row.id!r} seq {f.seq} {f.rule}: {f.message}" for f in check_log(header, events, INVARIANTS))
        return lines
    finally:
        store.close()


def violations_under(root: Path) -> list[str]:
    """The findings of every store under `root`, each line prefixed with the store's path."""
    return [f"{path}: {line}" for path in sorted(root.rglob(STORE_NAME)) for line in store_violations(path)]
