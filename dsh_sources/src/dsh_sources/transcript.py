"""What a source reads out of one of the agent's files, and what each agent's format provides.

`Transcript` is a session file projected to dsh's surface: the messages of its current
conversation (`dsh_host.sources.SourceMessage`) and the facts a listing shows. Each agent's module
implements `TranscriptFormat` (where its files are, how one is read); `source.TranscriptSource`
serves either through the same index.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dsh_host.sources import SourceMessage
from dsh_host.text import shorten_text

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

TITLE_CHARS = 80
"""A title made from a prompt is its first line's words, shortened to this many characters."""


@dataclass(frozen=True)
class Transcript:
    """One session file, projected: its id (the agent's own), cwd, times, title and messages.

    `skipped` and `oversized` count the lines the read left out (see `lines.JsonLines`).
    """

    agent_id: str
    cwd: str | None
    created_at: int
    updated_at: int
    title: str | None
    messages: tuple[SourceMessage, ...]
    skipped: int = 0
    oversized: int = 0


class TranscriptFormat(Protocol):
    """One agent's session files: where they are and how one is read."""

    provider: str
    """The agent, as the provenance `provider` of its assistant messages."""

    def files(self) -> Iterator[str]:
        """Every file that may hold a session (a missing folder holds none)."""
        ...

    def read(self, path: str) -> Transcript | None:
        """The file's session, or None for a file that holds none; OSError when it cannot be read."""
        ...

    def titles(self) -> Mapping[str, str]:
        """Titles the agent keeps outside its session files, by its own session id."""
        ...


def iso_ms(value: JsonValue) -> int | None:
    """An ISO 8601 timestamp (`2025-01-02T03:04:05.678Z`) in milliseconds, or None."""
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0, int(moment.timestamp() * 1000))


def prompt_title(text: str) -> str | None:
    """A title made from a prompt: its words on one line, shortened; None for a blank prompt."""
    title = shorten_text(text, TITLE_CHARS)
    return title or None


def absolute_cwd(value: JsonValue) -> str | None:
    """A cwd as a dsh header keeps it (an absolute POSIX path), or None."""
    return value if isinstance(value, str) and value.startswith("/") else None
