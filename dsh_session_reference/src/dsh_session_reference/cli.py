"""`dsh ref ...`: see what a reference is, and exactly what it would inject, without sending.

Every `dsh` command registers these commands, so each imports what it uses: `uri`, `mention`
and `parse` only compute, and `$(dsh ref mention ID)` starts as fast as a command can; the
commands that read sessions load asyncio.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from dsh_host import DshError, display_inline_text, display_text, inert_json

if TYPE_CHECKING:
    from dsh_host import Composition, Host, SessionHeader, SessionQuery
    from dsh_session_reference.candidates import Candidate
    from dsh_session_reference.errors import SessionReferenceError
    from dsh_session_reference.service import SessionReferenceService


class ReferenceFailed(DshError):
    """A reference operation failed; the message carries the error code."""


def _fail(error: SessionReferenceError) -> ReferenceFailed:
    from dsh_session_reference.errors import render_error_line

    return ReferenceFailed(f"{render_error_line(error)} ({error.code})")


def _service(host: Host) -> SessionReferenceService:
    service: SessionReferenceService | None = host.services.get("session_references")
    if service is None:
        raise DshError("the session-reference plugin is not mounted")
    return service


async def _target(host: Host, target_id: str) -> SessionHeader:
    from dsh_host import SessionNotFound

    try:
        query: SessionQuery = host.services.session_query
        return await query.read_header(target_id)
    except SessionNotFound as exc:
        raise DshError(f"target {exc}") from None


@click.group()
def ref() -> None:
    """Session references: URIs, mentions, candidates, and previews of what gets injected."""


@ref.command()
@click.argument("session_id")
def uri(session_id: str) -> None:
    """Print the canonical `dsh-session:` URI of SESSION_ID."""
    from dsh_session_reference.uri import encode_uri

    click.echo(encode_uri(session_id))


@ref.command()
@click.argument("session_id")
@click.option("--label", default=None, help="Label to show instead of the id.")
def mention(session_id: str, label: str | None) -> None:
    """Print the `@[label](uri)` mention of SESSION_ID."""
    from dsh_session_reference.mentions import format_mention

    click.echo(display_inline_text(format_mention(session_id, label)))


@ref.command()
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def parse(text: str, as_json: bool) -> None:
    """Parse mentions out of TEXT: the readable text and the references found."""
    from dsh_session_reference.errors import SessionReferenceError
    from dsh_session_reference.mentions import parse_text

    try:
        parsed = parse_text(text)
    except SessionReferenceError as exc:
        raise _fail(exc) from None
    refs = [{"sessionId": r.session_id, "label": r.label} for r in parsed.references]
    if as_json:
        click.echo(inert_json(json.dumps({"text": parsed.text, "references": refs}, ensure_ascii=False)))
        return
    click.echo(display_text(parsed.text))
    for r in refs:
        session_id, label = (inert_json(json.dumps(r[key], ensure_ascii=False)) for key in ("sessionId", "label"))
        click.echo(f"- {session_id} as {label}")


@ref.command()
@click.option("--target", "target_id", required=True, help="The session that would mention them.")
@click.argument("query", required=False, default="")
@click.option("--limit", type=int, default=None, help="At most this many candidates.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_obj
def candidates(host: Host, target_id: str, query: str, limit: int | None, as_json: bool) -> None:
    """List sessions TARGET may mention, best first (same cwd, then no cwd, then others)."""
    import asyncio

    from dsh_session_reference.errors import SessionReferenceError

    service = _service(host)

    async def go() -> list[Candidate]:
        target = await _target(host, target_id)
        return await service.list_candidates(target, query, limit)

    try:
        found = asyncio.run(go())
    except SessionReferenceError as exc:
        raise _fail(exc) from None
    for candidate in found:
        if as_json:
            click.echo(inert_json(json.dumps(candidate.to_json(), ensure_ascii=False)))
        else:
            cwd = display_inline_text(candidate.cwd) if candidate.cwd else "(no cwd)"
            session_id = display_inline_text(candidate.session_id)
            label = display_inline_text(candidate.label)
            click.echo(f"{session_id}  {cwd}  {label}")


@ref.command()
@click.option("--target", "target_id", required=True, help="The session the message would go to.")
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="Print the prepared content and contexts as JSON.")
@click.pass_obj
def preview(host: Host, target_id: str, text: str, as_json: bool) -> None:
    """Print exactly what the target's agent would send for TEXT (content and contexts); sends nothing."""
    import asyncio

    from dsh_host import ComposeError, SessionNotFound
    from dsh_session_reference.errors import SessionReferenceError

    _service(host)

    async def go() -> Composition:
        try:
            # Composing drives nothing: the target is read as stored, never leased, repaired or written.
            agent = await host.open_agent(target_id, read_only=True)
        except SessionNotFound as exc:
            raise DshError(f"target {exc}") from None
        try:
            return await agent.compose(text)
        finally:
            await agent.close()

    try:
        prepared = asyncio.run(go())
    except ComposeError as exc:
        # The feature's own error, without the terminal UI's prefix (its cause carries the chain).
        raise _fail(exc.__cause__) if isinstance(exc.__cause__, SessionReferenceError) else exc from None
    if as_json:
        click.echo(inert_json(json.dumps(prepared.to_json(), ensure_ascii=False)))
        return
    # Source text is untrusted: control characters are shown inert (`\xNN`); --json is exact.
    for block in prepared.content:
        click.echo(f"content: {display_text(block.get('text', ''))}")
    for context in prepared.contexts:
        click.echo(f"context ({context['placement']}, source {context['source']['plugin']}):")
        for block in context["content"]:
            click.echo(display_text(block.get("text", "")))
