"""The editor's completer: slash commands, and `@` mentions of files and of what plugins offer.

An `@` token completes workspace files (the host's own) and whatever the completion sources
plugins register through `dsh_register_completions` offer (session-reference offers other
sessions). All lookups run as one asyncio task that is abandoned as soon as typing moves on:
`supersede()` (wired to every edit) sets the cancel signal every source was given, so a slow
store never holds the menu on stale text. prompt_toolkit
runs one completion at a time and drops requests made meanwhile, so an abandoned request calls
`on_abandoned` afterwards, for the editor to ask again about the text it holds now. A request
that answers calls `on_answered(document)` once the editor has made its menu of the answer (the
editor's Tab, pressed before any row showed, chooses from it then).

A source whose answer is provisional (an item with `pending`, such as sessions still being
indexed) makes the completer call `on_pending` `REFRESH_SECONDS` later, unless typing moved on
meanwhile; the editor then fetches `ask_again()` and swaps the open menu's items in place, so
the menu fills itself while the text stays put.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from dsh_host.asyncs import abandon_on
from dsh_host.terminal_text import display_inline_text
from dsh_host.text import JS_WHITESPACE
from dsh_host.tui.file_search import (
    AtToken,
    FileMatch,
    FileSearchCancelled,
    WorkspaceFileSearch,
    active_at_token,
    format_file_mention,
)
from dsh_host.tui.mentions import REFRESH_SECONDS, MentionCompletion, RegisteredSource

if TYPE_CHECKING:
    from dsh_host.agent.agent import Agent

log = logging.getLogger("dsh.tui")


class MentionCompleter(Completer):
    """Completes `/commands` at the start of the input and `@` mentions anywhere.

    `files` is the workspace search in use; the chat replaces it when it moves to a session
    in another directory. Each of `sources` is asked with `target()`, read on every request
    because `/new` and `/resume` replace the agent.
    """

    def __init__(
        self,
        files: WorkspaceFileSearch,
        *,
        commands: Callable[[], Iterable[tuple[str, str]]],
        sources: Sequence[RegisteredSource] = (),
        target: Callable[[], Agent | None] = lambda: None,
        on_abandoned: Callable[[], None] | None = None,
        on_pending: Callable[[], None] | None = None,
        on_answered: Callable[[Document], None] | None = None,
    ) -> None:
        self.files = files
        self._commands = commands
        self._sources = tuple(sources)
        self._target = target
        self._on_abandoned = on_abandoned
        self._on_pending = on_pending
        self._on_answered = on_answered
        self._cancel: asyncio.Event | None = None
        self._pending: Document | None = None
        self._refresh: asyncio.TimerHandle | None = None

    def supersede(self) -> None:
        """Abandon the request in flight (the text it was made for has changed), and any refresh."""
        if self._cancel is not None:
            self._cancel.set()
            self._cancel = None
        self._pending = None
        if self._refresh is not None:
            self._refresh.cancel()
            self._refresh = None

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
            found: list[Completion] | None = []
        else:
            found = await self._mentions(document, token)
        loop = asyncio.get_running_loop()
        if found is None:
            if self._on_abandoned is not None:
                # Scheduled, not called: the editor accepts a new request only once this one returns.
                loop.call_soon(self._on_abandoned)
            for completion in base:
                yield completion
            return
        try:
            for completion in (*found, *base):
                yield completion
        finally:
            if self._on_answered is not None:
                # Scheduled, so it runs once the editor has made its menu of this answer (prompt_toolkit
                # does so in the same step as it takes the last item).
                loop.call_soon(self._on_answered, document)

    async def ask_again(self) -> tuple[Document, list[Completion]] | None:
        """The completions, asked anew, of the text whose last answer was pending.

        None when no answer is pending (typing moved on) or this request was abandoned too. The
        caller shows the result if the editor still holds that text; a new pending answer
        schedules `on_pending` again.
        """
        document = self._pending
        token = None if document is None else active_at_token(document.text_before_cursor)
        if document is None or token is None:
            return None
        found = await self._mentions(document, token)
        if found is None:
            return None
        return document, [*found, *self._command_completions(document)]

    async def _mentions(self, document: Document, token: AtToken) -> list[Completion] | None:
        """Files and the sources' items for `token` (None when abandoned); notes a pending answer."""
        self.supersede()
        cancel = self._cancel = asyncio.Event()
        lookups = [self._find_files(token, cancel)]
        lookups += [self._ask(source, token, cancel) for source in self._sources]
        try:
            found = await abandon_on(cancel, asyncio.gather(*lookups), FileSearchCancelled)
        except FileSearchCancelled:
            return None
        if cancel.is_set():
            return None
        items = [item for part in found for item in part]
        if any(pending for _, pending in items) and self._on_pending is not None:
            self._pending = document
            self._refresh = asyncio.get_running_loop().call_later(REFRESH_SECONDS, self._on_pending)
        # A pending item is a status line (more is coming): it leads, where the menu is seen.
        return [completion for completion, _ in sorted(items, key=lambda item: not item[1])]

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

    async def _find_files(self, token: AtToken, cancel: asyncio.Event) -> list[tuple[Completion, bool]]:
        try:
            matches = await self.files.search(token.query, cancel)
        except Exception:  # a failing search must not break the editor
            log.debug("file search failed for %r", token.query, exc_info=True)
            return []
        return [(item, False) for match in matches if (item := _file_completion(token, match)) is not None]

    async def _ask(
        self, source: RegisteredSource, token: AtToken, cancel: asyncio.Event
    ) -> list[tuple[Completion, bool]]:
        """The source's items, each with whether it says more is coming."""
        try:
            # The chat always has an agent; only a completer built without a target has none.
            items = await source.complete(cast("Agent", self._target()), token, cancel)
            return [(_mention_completion(token, item), item.pending) for item in items]
        except Exception:  # failures (cancellation included) just offer nothing from this source
            log.debug("mention completion failed for %r", token.query, exc_info=True)
            return []


def first_choice(document: Document, completions: Sequence[Completion]) -> Completion | None:
    """The first of `completions` that changes `document`'s text, or None.

    What Tab chooses when no row is selected: a status line (a pending item such as `indexing
    sessions`) puts back the token as typed, so it is passed over for the rows under it.
    """
    typed = document.text_before_cursor
    return next((c for c in completions if typed[len(typed) + c.start_position :] != c.text), None)


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


def _mention_completion(token: AtToken, item: MentionCompletion) -> Completion:
    return Completion(item.value, start_position=-len(token.prefix), display=item.display, display_meta=item.meta)
