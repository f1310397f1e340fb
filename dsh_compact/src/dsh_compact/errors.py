"""Errors compaction reports; the `dsh` command prints them as one line."""

from __future__ import annotations

from dsh_host import DshError


class CompactionError(DshError):
    """A compaction that was refused or failed (the session stays consistent either way)."""


class SummarizationError(CompactionError):
    """The summarizer produced no usable checkpoint; `code` is the model failure's code, if any."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message, code=code)
