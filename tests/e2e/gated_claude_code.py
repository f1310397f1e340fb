"""A plugin for the terminal tests: Claude Code's source whose first build stops at a gate.

The test installs it for the `dsh` it starts (copied as `dsh_gated_claude_code` beside a
dist-info naming it the `dsh` entry point `gated-claude-code`, in a folder on the child's
PYTHONPATH) and mounts it in place of `claude-code`; everything but the gate is that plugin's
own. `DSH_TEST_GATE` names a fifo and `DSH_TEST_GATE_AFTER` a number of files: the
build reads that many, commits them (its batches are made exactly that size and never cut by
time, so the count on the screen is exact), then waits in the read of the next file until the
test opens the fifo for writing and closes it. A build that reads nothing never meets the gate.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import dsh_sources.build
from dsh_host import hookimpl
from dsh_sources.claude_code import DISPLAY_NAME, HOME, NAME
from dsh_sources.claude_code import dsh_register_completions as dsh_register_completions  # the plugin's own
from dsh_sources.formats.claude_code import PROJECTION, ClaudeCodeFormat
from dsh_sources.source import register_source

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json, SourceFactory
    from dsh_sources.transcript import Projector, Stored

GATE = os.environ["DSH_TEST_GATE"]
AFTER = int(os.environ["DSH_TEST_GATE_AFTER"])

dsh_sources.build.BATCH_FILES = AFTER
dsh_sources.build.BATCH_SECONDS = float("inf")


class GatedFormat(ClaudeCodeFormat):
    """Claude Code's files; the read of file number `AFTER + 1` waits at the gate."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self._reads = 0

    def projector(self, path: str, state: Json | None, stored: Stored) -> Projector:
        self._reads += 1
        if self._reads == AFTER + 1:
            with open(GATE, "rb") as gate:  # blocks until the test opens the fifo's other end
                gate.read()
        return super().projector(path, state, stored)


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    register_source(
        register,
        NAME,
        GatedFormat,
        home=HOME,
        projection=PROJECTION,
        display_name=DISPLAY_NAME,
    )
