"""Test-side helpers for OpenCode's stores: a folder OpenCode would keep, and a source reading it.

The stores are written by `bench.corpus.opencode` (its `DatabaseWriter` creates the tables as
OpenCode's migrations do; `StorageWriter` writes the JSON folder of versions before 1.2): see
this folder's README for the OpenCode sources each follows.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from bench.corpus.opencode import DatabaseWriter, StorageWriter
from dsh_sources.formats.opencode import OpenCodeFormat
from dsh_sources.index import SourceIndex
from dsh_sources.source import AgentSource
from dsh_sources.stores import StoreUpdates
from dsh_sources.transcript import SessionRead, StoreRead

__all__ = ["DatabaseWriter", "StorageWriter", "listing", "opencode_source", "read_sessions"]


def opencode_source(base: Path, index: Path) -> AgentSource:
    """The `opencode` source on `base`, indexed in `index` (as the plugin opens it)."""
    fmt = OpenCodeFormat(base)
    source_index = SourceIndex(index, "opencode", 1)
    return AgentSource("opencode", fmt, source_index, StoreUpdates("opencode", fmt, source_index))


def read_sessions(
    base: Path, path: str, marks: Mapping[str, str] | None = None, cancel: threading.Event | None = None
) -> tuple[StoreRead, dict[str, SessionRead]]:
    """A read of the store `path` under `base`, and the sessions it handed over, by agent id."""
    sessions: dict[str, SessionRead] = {}
    read = OpenCodeFormat(base).read(
        path, marks or {}, lambda session: sessions.__setitem__(session.agent_id, session), cancel
    )
    return read, sessions


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry of `folder` (not below it) with its size and mtime: what a reader must not change."""
    out: dict[str, tuple[int, int]] = {}
    for name in os.listdir(folder):
        info = os.stat(folder / name)
        out[name] = (info.st_size, info.st_mtime_ns)
    return out
