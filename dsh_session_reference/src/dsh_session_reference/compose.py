"""Composing typed text: session mentions become one snapshot context riding with the message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host import ComposeError, Composition
from dsh_session_reference.errors import SessionReferenceError, render_error_chain
from dsh_session_reference.mentions import has_reference, parse_text

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable

    from dsh_host import Agent
    from dsh_session_reference.mentions import SessionReferenceInput
    from dsh_session_reference.service import SessionReferenceService

INVALID = "Invalid session reference: "
FAILED = "Session reference failed: "


def compose(
    service: SessionReferenceService, agent: Agent, text: str, signal: asyncio.Event
) -> Awaitable[Composition] | None:
    """The composition of `text` for `agent`, or None (abstain) when it mentions no session.

    Parsing is synchronous, so a text without mentions abstains at once and a malformed
    mention fails before anything is awaited; preparing the snapshot is the awaitable part.
    """
    if not has_reference(text):
        return None
    try:
        parsed = parse_text(text)
    except SessionReferenceError as exc:
        raise ComposeError(INVALID + render_error_chain(exc), code=exc.code) from exc
    if not parsed.references:
        return None
    return _prepare(service, agent, parsed.text, parsed.references, signal)


async def _prepare(
    service: SessionReferenceService,
    agent: Agent,
    text: str,
    references: list[SessionReferenceInput],
    signal: asyncio.Event,
) -> Composition:
    try:
        prepared = await service.prepare(agent, [{"type": "text", "text": text}], references, signal)
    except SessionReferenceError as exc:
        raise ComposeError(FAILED + render_error_chain(exc), code=exc.code) from exc
    except Exception as exc:
        raise ComposeError(FAILED + render_error_chain(exc)) from exc
    return Composition(prepared.content, prepared.contexts)
