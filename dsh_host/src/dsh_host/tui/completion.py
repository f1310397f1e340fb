"""The editor's completer: slash commands, and `@` mentions of files and sessions.

An `@` token completes workspace files and, when the session-reference service is mounted and
the token is not quoted, other sessions. Both lookups run as one asyncio task that is abandoned
as soon as typing moves on: `supersede()` (wired to every edit) sets the cancel signal the
candidate lookup was given, so a slow store never holds the menu on stale text. prompt_toolkit
runs one completion at a time and drops requests made meanwhile, so an abandoned request calls
`on_abandoned` afterwards, for the editor to ask again about the text it holds now.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from dsh_host.asyncs import abandon_on
from dsh_host.jstext import JS_WHITESPACE, iso_utc
from dsh_host.tui.file_search import (
    AtToken,
    FileMatch,
    FileSearchCancelled,
    WorkspaceFileSearch,
    active_at_token,
    format_file_mention,
)
from dsh_host.tui.terminal_text import display_inline_text

log = logging.getLogger("dsh.tui")


@dataclass(frozen=True)
class SessionSource:
    """Where session candidates come from: the service, the target, and the mention format.

    `target()` is read on every request because `/new` and `/resume` replace the agent.
    """

    service: Any
    target: Callable[[], Any]
    format_mention: Callable[[str, str | None], str]


class MentionCompleter(Completer):
    """Completes `/commands` at the start of the input and `@` mentions anywhere.

    `files` is the workspace search in use; the chat replaces it when it moves to a session
    in another directory.
    """

    def __init__(
        self,
        files: WorkspaceFileSearch,
        *,
        commands: Callable[[], Iterable[tuple[str, str]]],
        sessions: SessionSource | None = None,
        on_abandoned: Callable[[], None] | None = None,
    ) -> None:
        self.files = files
        self._commands = commands
        self._sessions = sessions
        self._on_abandoned = on_abandoned
        self._cancel: asyncio.Event | None = None

    def supersede(self) -> None:
        """Abandon the request in flight (the text it was made for has changed)."""
        if self._cancel is not None:
            self._cancel.set()
            self._cancel = None

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        """Synchronous callers get the command completions only; mentions need the async path."""
        yield from self._command_completions(document)

    async def get_completions_async(
        self, document: Document, complete_event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        base = list(self._command_completions(document))
        token = active_at_token(document.text_before_cursor)
        if token is None:
            self.files.invalidate()
            for completion in base:
                yield completion
            return
        self.supersede()
        cancel = self._cancel = asyncio.Event()
        try:
            files, sessions = await abandon_on(
                cancel,
                asyncio.gather(self._find_files(token, cancel), self._find_sessions(token, cancel)),
                FileSearchCancelled,
            )
        except FileSearchCancelled:
            files, sessions = [], []
        if cancel.is_set():
            files, sessions = [], []
            if self._on_abandoned is not None:
                # Scheduled, not called: the editor accepts a new request only once this one returns.
                asyncio.get_running_loop().call_soon(self._on_abandoned)
        for completion in (*files, *sessions, *base):
            yield completion

    def _command_completions(self, document: Document) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(ch in JS_WHITESPACE for ch in typed):
            return
        for name, help_text in self._commands():
            command = f"/{name}"
            if command.startswith(typed):
                yield Completion(
                    command + " ",
                    start_position=-len(typed),
                    display=display_inline_text(command),
                    display_meta=display_inline_text(help_text),
                )

    async def _find_files(self, token: AtToken, cancel: asyncio.Event) -> list[Completion]:
        try:
            matches = await self.files.search(token.query, cancel)
        except Exception:  # a failing search must not break the editor
            log.debug("file search failed for %r", token.query, exc_info=True)
            return []
        return [item for match in matches if (item := _file_completion(token, match)) is not None]

    async def _find_sessions(self, token: AtToken, cancel: asyncio.Event) -> list[Completion]:
        if self._sessions is None or token.quoted:
            return []
        source = self._sessions
        try:
            candidates = await source.service.list_candidates(source.target(), token.query, None, cancel)
            # Inside the guard too: a stored time beyond what a date can hold must not break typing.
            return [_session_completion(token, candidate, source.format_mention) for candidate in candidates]
        except Exception:  # failures (cancellation included) just offer no sessions
            log.debug("session candidates failed for %r", token.query, exc_info=True)
            return []


def _file_completion(token: AtToken, match: FileMatch) -> Completion | None:
    value = format_file_mention(match.path, match.is_dir, quoted=token.quoted)
    if value is None:
        return None
    if match.is_dir:
        # Leave a quoted directory open so the completion continues inside it.
        value = value.removesuffix('"')
    else:
        value += " "
    kind, suffix = ("Folder", "/") if match.is_dir else ("File", "")
    return Completion(
        value,
        start_position=-len(token.prefix),
        display=f"{kind} · {display_inline_text(match.name)}{suffix}",
        display_meta=display_inline_text(match.path + suffix),
    )


def _session_completion(token: AtToken, candidate: Any, format_mention: Callable[..., str]) -> Completion:
    # The label is escaped before it becomes the mention label, so the readable `@label` the
    # model and the transcript see is inert; the URI keeps the raw id.
    label = display_inline_text(candidate.label)
    parts = []
    if candidate.label != candidate.session_id:
        parts.append(display_inline_text(candidate.session_id))
    parts.append(display_inline_text(candidate.cwd) if candidate.cwd else "(no cwd)")
    parts.append(iso_utc(candidate.created_at))
    return Completion(
        format_mention(candidate.session_id, label) + " ",
        start_position=-len(token.prefix),
        display=f"Session · {label}",
        display_meta=" · ".join(parts),
    )
