"""What a mention completion source offers the editor (see the `dsh_register_completions` hook)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host.tui.file_search import AtToken

if TYPE_CHECKING:
    import asyncio

    from dsh_host.agent.agent import Agent
    from dsh_host.host import Host


@dataclass(frozen=True)
class MentionCompletion:
    """One item of the `@` menu: `value` replaces the token; `display` and `meta` are shown.

    `display` and `meta` reach the terminal: escape untrusted text in them with
    `display_inline_text`. `value` goes into the editor as is (end it with a space to close
    the mention).

    `pending` says the source's answer is provisional (it is still gathering what it offers,
    such as sessions being indexed; the item is typically a status line whose `value` is the
    token as typed): while the text at the cursor stays as it is, the menu asks every source
    again every half second by itself, without a keystroke, until no item says `pending`. A
    pending item leads the menu (before files and other sources' items).
    """

    value: str
    display: str
    meta: str = ""
    pending: bool = False


REFRESH_SECONDS = 0.5
"""How long the `@` menu waits before asking again while an item it shows is `pending`."""


CompletionSource = Callable[["Agent", AtToken, "asyncio.Event"], Awaitable[Sequence[MentionCompletion]]]
"""`await complete(agent, token, signal)`: the items a plugin offers for the `@` token at the cursor."""


@dataclass(frozen=True)
class RegisteredSource:
    """A completion source with the `/help` line that explains its syntax."""

    complete: CompletionSource
    hint: str | None = None


def collect_sources(host: Host) -> list[RegisteredSource]:
    """Every source the host and its plugins register through `dsh_register_completions`."""
    sources: list[RegisteredSource] = []

    def register(complete: CompletionSource, hint: str | None = None) -> None:
        sources.append(RegisteredSource(complete, hint))

    host.hook.dsh_register_completions(host=host, register=register)
    return sources
