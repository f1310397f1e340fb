"""What `dsh mcp` serves, in dsh's own terms: session search, framed snapshots, and the listing.

Nothing here knows the protocol (`dsh_host.mcp.server` maps these calls onto tools and
resources). Text from sessions leaves in two shapes only: a framed snapshot, byte for byte what
a `@`-mention of the same sessions injects (session-reference's `prepare`, with no target), and
search results (names, times, a snippet). Every string that leaves is valid Unicode: a lone
surrogate is written `\\udXXX`, as `JSON.stringify` writes it; URIs are exact whatever the id.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol, runtime_checkable

from dsh_host import CandidateRow, DshError, SessionNotFound, SessionQuery, SessionRecord, display_text
from dsh_host.jsontypes import Json, JsonValue
from dsh_host.mcp.indexing import SourceIndexes
from dsh_host.sources import IndexProgress
from dsh_host.store.base import ListingKey
from dsh_host.text import escape_lone_surrogates, iso_utc

PAGE_SIZE = 200
"""Resources per `resources/list` page."""
SEARCH_WAIT_SECONDS = 2.5
"""How long a search waits for unfinished index builds before it answers from what is indexed
(the rest of a 5 s answer is the search itself)."""
NAMES_KEPT = 4_096
"""How many sessions' names (URI, mention, times) a catalog keeps: a client that searches again
mostly finds sessions it found before, and naming one costs more than the rest of its result."""


class PreparedSnapshot(Protocol):
    """What `prepare` returns, as far as `dsh mcp` reads it: the one reference context it built."""

    @property
    def contexts(self) -> list[dict[str, JsonValue]]: ...


@runtime_checkable
class SnapshotService(Protocol):
    """What `dsh mcp` needs of a session-reference service (the `session-reference` plugin's).

    A reference `parse_reference` returns is opaque here: it only goes back to `prepare`.
    """

    max_references: int
    uri_scheme: str

    async def prepare(
        self, target: None, content: Sequence[Json], references: Sequence[object], cancel: None = None
    ) -> PreparedSnapshot: ...

    def parse_reference(self, text: str) -> object: ...

    def format_mention(self, session_id: str, label: str | None = None) -> str: ...

    def encode_uri(self, session_id: str) -> str: ...

    def decode_uri(self, uri: str) -> str: ...

    def describe_error(self, error: BaseException) -> str: ...


class CatalogError(DshError):
    """A call that failed as a whole; the message is the one line `dsh` would print for it."""


class UnknownResource(DshError):
    """A resource URI that names no session this principal can read (or is not a session URI)."""


class InvalidCursor(DshError):
    """A `resources/list` cursor this server did not hand out."""


class FoundSession(NamedTuple):
    """One search result. `title` and `snippet` are text from another conversation.

    `agent` names the other agent keeping the session (`Claude Code`); None for dsh's own.
    A named tuple, as the store's rows are: a search makes one per result.
    """

    id: str
    uri: str
    mention: str
    title: str | None
    agent: str | None
    cwd: str | None
    created_at: str
    last_activity_at: str | None
    snippet: str | None

    def to_json(self) -> dict[str, str | None]:
        """The result as the tool returns it (its fields under their JSON names, in order)."""
        return dict(zip(FOUND_JSON_KEYS, self, strict=True))


FOUND_JSON_KEYS = ("id", "uri", "mention", "title", "agent", "cwd", "createdAt", "lastActivityAt", "snippet")
"""A `FoundSession`'s fields under their JSON names, in order."""

_Named = tuple[str, str, str, str | None, str | None, str | None, str, str | None]
"""A `FoundSession`'s fields but the snippet."""


@dataclass(frozen=True)
class Snapshot:
    """The framed snapshot of some sessions and what was kept of each (`sources`, in order)."""

    text: str
    sources: tuple[Json, ...]


@dataclass(frozen=True)
class SessionResource:
    """A readable session as a resource: its URI, its title (else its id), when it was last active (if known)."""

    uri: str
    name: str
    description: str
    last_activity_at: str | None


@dataclass(frozen=True)
class ResourcePage:
    """One page of the resources, newest first; `next_cursor` is None on the last."""

    resources: tuple[SessionResource, ...]
    next_cursor: str | None


class SessionCatalog:
    """Search, snapshots and the listing of one host's readable sessions.

    Reads go through the host's session query service (so through the store's visibility:
    what row-level security hides does not exist here) and session-reference's preparation.
    With `indexes`, the sources' index builds are started on `start_indexing` (or the first
    `indexing`) and searches say how far the unfinished ones are.
    """

    def __init__(self, query: SessionQuery, snapshots: SnapshotService, indexes: SourceIndexes | None = None) -> None:
        self._query = query
        self._snapshots = snapshots
        self._indexes = indexes
        self._named = lru_cache(maxsize=NAMES_KEPT)(self._name)

    def start_indexing(self) -> None:
        """Start the sources' index builds in the background (needs a running event loop)."""
        if self._indexes is not None:
            self._indexes.start()

    def stop_waiting(self) -> None:
        """Searches wait no more for the index builds (the server's end has begun)."""
        if self._indexes is not None:
            self._indexes.hurry()

    async def indexing(self) -> dict[str, IndexProgress]:
        """The sources' unfinished index builds, after waiting up to `SEARCH_WAIT_SECONDS` for them.

        Empty when every index is complete: a search then sees every session.
        """
        return {} if self._indexes is None else await self._indexes.unfinished(SEARCH_WAIT_SECONDS)

    def indexing_line(self, unfinished: dict[str, IndexProgress]) -> str:
        """The one line a partial answer carries (`unfinished` comes from `indexing`, so there are indexes)."""
        assert self._indexes is not None
        return self._indexes.line(unfinished)

    @property
    def max_references(self) -> int:
        return self._snapshots.max_references

    @property
    def uri_scheme(self) -> str:
        return self._snapshots.uri_scheme

    async def search(self, query: str, cwd: str | None, limit: int) -> list[FoundSession]:
        """What `dsh sessions search` finds, best first; `cwd` ranks that directory's sessions first.

        Without `cwd` no directory is preferred. An empty query lists the newest sessions.
        """
        try:
            rows: Sequence[CandidateRow | SessionRecord]
            if not query and cwd is None:
                rows = await self._query.list_sessions_page(limit)
            else:
                rows = await self._query.search_candidates(
                    query, target_id=None, target_cwd=cwd, limit=limit, group_by_cwd=cwd is not None
                )
        except DshError as exc:
            raise CatalogError(self._one_line(exc)) from exc
        return [self._found(row) for row in rows]

    def _found(self, row: CandidateRow | SessionRecord) -> FoundSession:
        if isinstance(row, CandidateRow):
            snippet, agent = _text(row.snippet), self._query.agent_name(row.id)
        else:
            snippet, agent = None, row.agent
        named = self._named(row.id, row.title, agent, row.cwd, row.created_at, row.last_activity_at)
        return FoundSession(*named, snippet)

    def _name(
        self,
        session_id: str,
        title: str | None,
        agent: str | None,
        cwd: str | None,
        created_at: float,
        last_activity_at: float | None,
    ) -> _Named:
        """All of a found session's result but its snippet: a function of these arguments only."""
        # The label is escaped before the mention is written, so the mention escapes the `\` of
        # each `\udXXX` and reads back as the label the model sees.
        label = escape_lone_surrogates(session_id if title is None else title)
        mention = self._snapshots.format_mention(session_id, label)
        return (
            escape_lone_surrogates(session_id),
            # The mention ends with the URI in parentheses, and a URI holds no parenthesis.
            mention[mention.rindex("(") + 1 : -1],
            escape_lone_surrogates(mention),
            _text(title),
            _text(agent),
            _text(cwd),
            iso_utc(created_at),
            _time(last_activity_at),
        )

    async def snapshot(self, references: Sequence[str]) -> Snapshot:
        """The snapshot a `@`-mention of `references` (ids, URIs or mentions) would inject; all or nothing."""
        if not references:
            raise CatalogError("name at least one session")
        try:
            parsed = [await self._labelled(text) for text in references]
            prepared = await self._snapshots.prepare(None, [], parsed)
        except DshError as exc:
            raise CatalogError(self._one_line(exc)) from exc
        (context,) = prepared.contexts
        (block,) = context["content"]
        sources = tuple(
            {
                "sessionId": escape_lone_surrogates(meta["sessionId"]),
                "label": escape_lone_surrogates(meta["label"]),
                "uri": self._snapshots.encode_uri(meta["sessionId"]),
                **{key: meta[key] for key in _KEPT_META},
            }
            for meta in context["meta"]["references"]
        )
        return Snapshot(block["text"], sources)

    async def _labelled(self, text: str) -> object:
        """The reference `text` names, labelled as the `@` menu labels its session.

        A mention keeps its own label; a session named by id or URI is labelled with its title
        when it has one (else its id), escaped as a search result's mention label is. A session
        that cannot be read keeps the id, for `prepare` to report.
        """
        parsed = self._snapshots.parse_reference(text)
        if text.startswith("@["):
            return parsed
        session_id = self._snapshots.decode_uri(text) if text.startswith(self.uri_scheme) else text
        try:
            title = await self._query.read_title(session_id)
        except DshError:
            return parsed
        if title is None:
            return parsed
        return self._snapshots.parse_reference(
            self._snapshots.format_mention(session_id, escape_lone_surrogates(title.title))
        )

    async def page(self, cursor: str | None) -> ResourcePage:
        """One page of `PAGE_SIZE` resources after `cursor` (None: the newest); costs what the page holds."""
        after = None if cursor is None else _decode_cursor(cursor)
        try:
            # One more than the page: a full page says there is another only when there is.
            records = await self._query.list_sessions_page(PAGE_SIZE + 1, after)
        except DshError as exc:
            raise CatalogError(self._one_line(exc)) from exc
        shown = records[:PAGE_SIZE]
        more = len(records) > PAGE_SIZE
        return ResourcePage(
            tuple(self._resource(record) for record in shown),
            _encode_cursor((shown[-1].created_at, shown[-1].id)) if more else None,
        )

    def _resource(self, record: SessionRecord) -> SessionResource:
        cwd = "(no cwd)" if record.cwd is None else display_text(record.cwd)
        created, active = iso_utc(record.created_at), _time(record.last_activity_at)
        agent = record.agent or record.source
        kind = "dsh session" if agent is None else f"{display_text(agent)} session (read-only source)"
        when = f"created {created}" if active is None else f"created {created}, last active {active}"
        return SessionResource(
            uri=self._snapshots.encode_uri(record.id),
            name=escape_lone_surrogates(record.id if record.title is None else record.title),
            description=f"{kind} {display_text(record.id)} in {cwd}, {when}",
            last_activity_at=active,
        )

    async def read(self, uri: str) -> str:
        """The framed snapshot of the session `uri` names (its canonical `dsh-session:` URI only)."""
        try:
            self._snapshots.decode_uri(uri)
        except DshError as exc:
            raise UnknownResource(f"Unknown resource: {escape_lone_surrogates(uri)}") from exc
        try:
            return (await self.snapshot([uri])).text
        except CatalogError as exc:
            # Unknown and hidden alike: a session this principal cannot read does not exist.
            if isinstance(exc.__cause__, DshError) and isinstance(exc.__cause__.__cause__, SessionNotFound):
                raise UnknownResource(f"Unknown resource: {uri}") from exc
            raise

    def _one_line(self, error: DshError) -> str:
        """The line `dsh` prints for `error` (after `dsh: error: `): its cause chain, then its code."""
        text = self._snapshots.describe_error(error)
        return display_text(text if error.code is None else f"{text} ({error.code})")


_KEPT_META = (
    "capturedThroughSeq",
    "compacted",
    "originalMessages",
    "retainedMessages",
    "omittedMessages",
    "omittedBytes",
    "truncated",
)
"""What a snapshot's meta says about each source, passed on as it is."""


def _time(value: int | float | None) -> str | None:
    return None if value is None else iso_utc(value)


def _text(value: str | None) -> str | None:
    return None if value is None else escape_lone_surrogates(value)


def _encode_cursor(key: ListingKey) -> str:
    """An opaque cursor: the listing key as ASCII JSON (a lone surrogate escaped), base64url."""
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode("ascii")).decode("ascii")


def _decode_cursor(cursor: str) -> ListingKey:
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (UnicodeEncodeError, binascii.Error, ValueError) as exc:
        raise InvalidCursor(f"invalid cursor {json.dumps(cursor)}") from exc
    if not (
        isinstance(key, list)
        and len(key) == 2
        and type(key[0]) in (int, float)
        and math.isfinite(key[0])
        and isinstance(key[1], str)
        and _encode_cursor((key[0], key[1])) == cursor
    ):
        raise InvalidCursor(f"invalid cursor {json.dumps(cursor)}")
    return key[0], key[1]
