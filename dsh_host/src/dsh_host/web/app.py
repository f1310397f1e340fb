"""The `dsh web` application: read-only pages over session query, session-reference and the log.

Routes (every one GET or HEAD; `Guard` stands in front of all of them):

- `/`: the listing, newest activity first, filtered by `agent` and `cwd`, paged by `after`;
- `/rows`: the listing's first page alone (the page's script polls it to stay current);
- `/search?q=&cwd=`: what `dsh sessions search` finds, with `cwd` preferred;
- `/s/{uri}`: a session's surface, newest page first, `before` for older ones;
- `/s/{uri}/after?position=`: its entries after a position (the page's script polls it);
- `/s/{uri}/log`: its full log, newest page first, `before_seq` for older ones;
- `/s/{uri}/preview`: what a mention of it brings, framed as `dsh ref preview` shows it;
- `/s/{uri}/export.jsonl`, `/s/{uri}/export.html`: the log as `dsh sessions export` writes it,
  and a static page of the session.

A session is named by its `dsh-session:` URI. A malformed URI and a session this principal
cannot read are both a 404 with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dsh_host.errors import DshError
from dsh_host.paging import InvalidPageRequest
from dsh_host.store.base import SessionNotFound
from dsh_host.terminal_text import display_inline_text
from dsh_host.web.export import export_log
from dsh_host.web.jinja import templates
from dsh_host.web.panels import session_panels
from dsh_host.web.service import SessionHtml
from dsh_host.web.text import visible_text
from dsh_host.web.views import Row, heading, log_event, message, row

if TYPE_CHECKING:
    from dsh_host.host import Host
    from dsh_host.mcp.catalog import SessionCatalog, SnapshotService
    from dsh_host.mcp.indexing import SourceIndexes
    from dsh_host.paging import AgentInfo, SurfaceEntry
    from dsh_host.query import SessionQuery, SessionRecord
    from dsh_host.session.events import SessionHeader
    from dsh_host.store.base import CandidateRow

HERE = Path(__file__).parent
LIST_PAGE = 50
SEARCH_LIMIT = 50
SURFACE_PAGE = 200
LOG_PAGE = 500
MESSAGES_KEPT = 4_096
"""How many messages' markup the pages keep (a little more than ten pages of a session)."""
ROWS_KEPT = 1_024
"""How many listed or found sessions' rows of markup the pages keep (twenty pages of the list)."""
OPTIONS_KEPT = 16
"""How many renderings of the directory filter's options the list keeps (one per chosen cwd)."""


class NotFound(DshError):
    """A session URI that is malformed or names no session this principal can read (404)."""


class BadRequest(DshError):
    """A parameter that cannot be read (400)."""


@dataclass(frozen=True)
class Reader:
    """What the pages read through: session query, session-reference, search, and the host."""

    query: SessionQuery
    snapshots: SnapshotService
    catalog: SessionCatalog
    indexes: SourceIndexes
    """The sources' index builds (the catalog's): the list says when they are not done."""
    host: Host
    """The host: its mounted sources name the agents, its plugins add panels to a session's pages."""


def build_app(reader: Reader) -> Starlette:
    """The application (without its `Guard`, which `dsh web` wraps around it)."""
    env = templates()
    messages_template = env.get_template("messages.html")
    rows_template = env.get_template("rows.html")
    options_template = env.get_template("options.html")

    # A log event never changes once written, so neither does its message's markup: a page seen
    # before (or the live view's next poll) renders from here.
    @lru_cache(maxsize=MESSAGES_KEPT)
    def message_html(entry: SurfaceEntry) -> Markup:
        return Markup(messages_template.render(messages=[message(entry)]))

    # A row's markup is a function of the record read (and of the words it highlights): the list
    # shows the same rows on every refresh and every poll of its first page, so they render once.
    @lru_cache(maxsize=ROWS_KEPT)
    def record_html(record: SessionRecord) -> Markup:
        return Markup(rows_template.render(rows=[_record_row(reader, record)]))

    @lru_cache(maxsize=ROWS_KEPT)
    def found_html(found: CandidateRow, agent: str | None, words: tuple[str, ...]) -> Markup:
        uri = reader.snapshots.encode_uri(found.id)
        shown = row(
            found.id, uri, found.title, agent, found.cwd, found.created_at, found.last_activity_at, found.snippet, words
        )
        return Markup(rows_template.render(rows=[shown]))

    # The directories change far less often than the list is shown (a new project, not a new session).
    @lru_cache(maxsize=OPTIONS_KEPT)
    def cwd_options(cwds: tuple[str, ...], chosen: str | None) -> Markup:
        return Markup(options_template.render(options=[(c, visible_text(c)) for c in cwds], chosen=chosen))

    # The agents to filter by are the host's mounted sources, which are fixed for its life: read once.
    agents_known: list[AgentInfo] = []

    async def known_agents() -> list[AgentInfo]:
        if not agents_known:
            agents_known.extend(await reader.query.list_agents())
        return agents_known

    def page(name: str, **context: object) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context))

    def session_id(request: Request) -> str:
        uri = request.path_params["uri"]
        try:
            return reader.snapshots.decode_uri(uri)
        except DshError:
            raise NotFound(f"not a session URI: {visible_text(uri)}") from None

    async def heading_of(request: Request) -> tuple[str, SessionHeader, str | None]:
        """The session's id, header and title (the heading of its log and preview), read at once."""
        sid = session_id(request)
        header, title = await asyncio.gather(reader.query.read_header(sid), reader.query.read_title(sid))
        return sid, header, None if title is None else title.title

    def int_param(request: Request, name: str) -> int | None:
        value = request.query_params.get(name)
        if value is None or value == "":
            return None
        if not value.isdigit():
            raise BadRequest(f"{name} must be a whole number, not {visible_text(value)}")
        return int(value)

    async def listing(request: Request) -> Response:
        agent = request.query_params.get("agent") or None
        cwd = request.query_params.get("cwd") or None
        after = request.query_params.get("after") or None
        # The reads on worker threads at once: the page waits for the slowest, not their sum.
        result, agents, cwds, unfinished = await asyncio.gather(
            reader.query.list_page(agent=agent, cwd=cwd, after=after, limit=LIST_PAGE),
            known_agents(),
            reader.query.list_cwds(agent=agent),
            _unfinished(reader),
        )
        return page(
            "list.html",
            rows=_joined(record_html(r) for r in result.records),
            agents=agents,
            agent=agent,
            cwd=cwd,
            cwd_options=cwd_options(tuple(cwds), cwd),
            next=result.next,
            first=after is None,
            indexing=[visible_text(reader.host.sources.display_name(name)) for name in unfinished],
        )

    async def rows(request: Request) -> Response:
        agent = request.query_params.get("agent") or None
        cwd = request.query_params.get("cwd") or None
        result = await reader.query.list_page(agent=agent, cwd=cwd, limit=LIST_PAGE)
        return HTMLResponse(_joined(record_html(r) for r in result.records))

    async def search(request: Request) -> Response:
        from dsh_host.sources import SearchQuery

        q = request.query_params.get("q", "")
        cwd = request.query_params.get("cwd") or None
        rows: list[Markup] = []
        indexing: str | None = None
        if q.strip():
            unfinished = await reader.catalog.indexing()
            indexing = reader.catalog.indexing_line(unfinished) if unfinished else None
            found = await reader.query.search_candidates(
                q, target_id=None, target_cwd=cwd, limit=SEARCH_LIMIT, group_by_cwd=cwd is not None
            )
            words = tuple(SearchQuery(q).words)
            rows = [found_html(r, reader.query.agent_name(r.id), words) for r in found]
        return page(
            "search.html",
            q=visible_text(q),
            raw_q=q,
            cwd=cwd or "",
            rows=_joined(rows),
            searched=bool(q.strip()),
            indexing=None if indexing is None else visible_text(indexing),
        )

    async def session(request: Request) -> Response:
        sid = session_id(request)
        before = int_param(request, "before")
        # The page carries the header and title: one read, not three.
        surface = await reader.query.read_surface_page(sid, before=before, limit=SURFACE_PAGE)
        return page(
            "session.html",
            **await _session_context(reader, sid, surface.header, surface.title, request),
            messages=_joined(message_html(e) for e in surface.entries),
            older=surface.before,
            newest=before is None,
            last_position=surface.entries[-1].position if surface.entries else -1,
        )

    async def after(request: Request) -> Response:
        surface = await reader.query.read_surface_page(session_id(request), limit=SURFACE_PAGE)
        position = int_param(request, "position")
        new = [e for e in surface.entries if position is None or e.position > position]
        html = _joined(message_html(e) for e in new)
        last = new[-1].position if new else position
        return JSONResponse({"html": html, "position": last})

    async def log(request: Request) -> Response:
        sid, header, title = await heading_of(request)
        before_seq = int_param(request, "before_seq")
        events = await reader.query.read_events_page(sid, before_seq=before_seq, limit=LOG_PAGE)
        return page(
            "log.html",
            **await _session_context(reader, sid, header, title, request),
            events=[log_event(e) for e in events.events],
            older=events.before_seq,
        )

    async def preview(request: Request) -> Response:
        sid, header, title = await heading_of(request)
        snapshot = await reader.catalog.snapshot([reader.snapshots.encode_uri(sid)])
        budget = getattr(reader.snapshots, "max_reference_bytes", None)
        sources = [
            {
                "label": visible_text(str(meta.get("label"))),
                "budget": budget,
                "bytes": len(snapshot.text.encode("utf-8", "surrogatepass")),
                **{k: meta.get(k) for k in ("originalMessages", "retainedMessages", "omittedMessages", "omittedBytes")},
                "truncated": bool(meta.get("truncated")),
                "compacted": bool(meta.get("compacted")),
            }
            for meta in snapshot.sources
        ]
        return page(
            "preview.html",
            **await _session_context(reader, sid, header, title, request),
            snapshot=visible_text(snapshot.text),
            sources=sources,
        )

    async def export_jsonl(request: Request) -> Response:
        header, lines = await reader.query.read_lines(session_id(request))
        return Response(
            export_log(header, lines),
            media_type="application/x-ndjson; charset=utf-8",
            headers={"content-disposition": 'attachment; filename="session.jsonl"'},
        )

    async def export_page(request: Request) -> Response:
        html = await SessionHtml(reader.query).page(session_id(request))
        return HTMLResponse(html, headers={"content-disposition": 'attachment; filename="session.html"'})

    async def refused(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, NotFound) else 400
        return PlainTextResponse(f"{visible_text(str(exc))}\n", status_code=status)

    # Every read of a session raises SessionNotFound for one this principal cannot read: one
    # answer here, so no route reads the header first only to find out.
    async def missing(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(f"no session {visible_text(session_id(request))}\n", status_code=404)

    routes = [
        Route("/", listing),
        Route("/rows", rows),
        Route("/search", search),
        Route("/s/{uri}", session),
        Route("/s/{uri}/after", after),
        Route("/s/{uri}/log", log),
        Route("/s/{uri}/preview", preview),
        Route("/s/{uri}/export.jsonl", export_jsonl),
        Route("/s/{uri}/export.html", export_page),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The sources' index builds run in the background while the pages are served (a large
        # agent home takes minutes); a search meanwhile says how far they are.
        reader.catalog.start_indexing()
        yield
        reader.catalog.stop_waiting()

    return Starlette(
        routes=routes,
        exception_handlers={
            NotFound: refused,
            BadRequest: refused,
            InvalidPageRequest: refused,
            SessionNotFound: missing,
        },
        lifespan=lifespan,
    )


def _joined(parts: Iterable[Markup]) -> Markup:
    """Pieces of markup as one. (`Markup.join` passes each piece through `escape` again, which
    leaves markup as it is but costs as much as the join itself on a page of 200 messages.)"""
    return Markup("".join(parts))


def _record_row(reader: Reader, record: SessionRecord) -> Row:
    uri = reader.snapshots.encode_uri(record.id)
    return row(record.id, uri, record.title, record.agent, record.cwd, record.created_at, record.last_activity_at)


async def _session_context(
    reader: Reader, session_id: str, header: SessionHeader, title: str | None, request: Request
) -> dict[str, object]:
    """What every page of one session shows at its top, and what its buttons copy."""
    panels = await session_panels(reader.host, session_id)
    agent = reader.query.agent_name(session_id)
    uri = reader.snapshots.encode_uri(session_id)
    # Labelled as `dsh ref mention` and the `@` menu label it: the title made inert, else the id.
    mention = display_inline_text(reader.snapshots.format_mention(session_id, display_inline_text(title or session_id)))
    chat = None if agent is not None else f"dsh chat --session {_shell_word(session_id)}"
    return {
        **heading(session_id, title, agent, header.cwd, header.created_at),
        "uri": uri,
        "own": agent is None,
        "mention": mention,
        "mention_shown": visible_text(mention),
        "chat": chat,
        "path": request.url.path,
        "panels": panels,
    }


async def _unfinished(reader: Reader) -> list[str]:
    """The sources whose index builds are not done yet (not waited for)."""
    return list(await reader.indexes.unfinished(0))


def _shell_word(text: str) -> str:
    """`text` as one shell word (quoted unless it is plain), its control characters inert."""
    return shlex.quote(display_inline_text(text))
