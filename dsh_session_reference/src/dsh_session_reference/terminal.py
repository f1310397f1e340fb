"""Session references in the terminal UI: the transcript's card line and the `@` session menu.

The plugin registers both through the host's hooks: `render_reference` renders the contexts
whose `meta.kind` is `session-reference` (`dsh_register_context_renderers`),
`SessionCompletions` is a mention source (`dsh_register_completions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dsh_host import display_inline_text, display_text
from dsh_host.text import iso_utc
from dsh_host.ui import MentionCompletion, card
from dsh_session_reference.frame import META_KIND
from dsh_session_reference.mentions import format_mention

if TYPE_CHECKING:
    import asyncio

    from rich.console import RenderableType

    from dsh_host import Agent
    from dsh_host.hookspecs import Json
    from dsh_host.ui import AtToken
    from dsh_session_reference.candidates import Candidate
    from dsh_session_reference.service import SessionReferenceService

HINT = "@name mentions another session"


def reference_card(meta: object) -> str | None:
    """The `Referenced sessions · ...` line for a session-reference meta, or None if invalid.

    Valid means `kind == "session-reference"` and a `references` list whose every entry has a
    string `sessionId` and a string `label`; one bad entry invalidates the whole card.
    """
    if not isinstance(meta, Mapping) or meta.get("kind") != META_KIND:
        return None
    references = meta.get("references")
    if not isinstance(references, Sequence) or isinstance(references, str):
        return None
    entries = []
    for ref in references:
        if not isinstance(ref, Mapping):
            return None
        session_id, label = ref.get("sessionId"), ref.get("label")
        if not isinstance(session_id, str) or not isinstance(label, str):
            return None
        entries.append(display_text(session_id if label == session_id else f"{label} ({session_id})"))
    return "Referenced sessions · " + ", ".join(entries)


def render_reference(meta: Json) -> RenderableType | None:
    """The card of a reference context as a transcript item, or None for an invalid meta."""
    text = reference_card(meta)
    return card(text) if text is not None else None


class SessionCompletions:
    """The `@` completion source offering other sessions (only for an unquoted token)."""

    def __init__(self, service: SessionReferenceService) -> None:
        self._service = service

    async def __call__(self, agent: Agent, token: AtToken, signal: asyncio.Event) -> list[MentionCompletion]:
        if token.quoted:
            return []
        candidates = await self._service.list_candidates(agent, token.query, None, signal)
        return [candidate_completion(candidate) for candidate in candidates]


def candidate_completion(candidate: Candidate) -> MentionCompletion:
    """One menu item: `Session · <label>`, the id (when it differs), cwd, creation time and snippet.

    Another agent's session reads `<agent> · <label>` (`Claude Code · <title>`), so the row
    tells whose it is. The snippet (a body match's excerpt) ends the description, terminal-safe.
    """
    # The label is escaped before it becomes the mention label, so the readable `@label` the
    # model and the transcript see is inert; the URI keeps the raw id.
    label = display_inline_text(candidate.label)
    parts = []
    if candidate.label != candidate.session_id:
        parts.append(display_inline_text(candidate.session_id))
    parts.append(display_inline_text(candidate.cwd) if candidate.cwd else "(no cwd)")
    parts.append(iso_utc(candidate.created_at))
    snippet = getattr(candidate, "snippet", None)  # a service's candidates need not carry one
    if snippet is not None:
        parts.append(display_inline_text(snippet))
    agent = getattr(candidate, "agent", None)
    kind = "Session" if agent is None else display_inline_text(agent)
    return MentionCompletion(
        format_mention(candidate.session_id, label) + " ", display=f"{kind} · {label}", meta=" · ".join(parts)
    )
