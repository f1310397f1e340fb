"""Session sources (public namespace `dsh_host.sources`): other programs' sessions, read in place.

A source is the read half of a store, registered through the `dsh_register_session_sources`
hook; its sessions carry ids `<source>:<the agent's own id>`, the session query service answers
from the store and every mounted source alike, and the host refuses any write to a source's
session. docs/sources.md describes the seam.

- `SessionSources`: the type of `host.sources`, the mounted sources by name (`names`,
  `get(name)`, `owner(session_id)`, `display_name(name)`, `agent_name(session_id)`).
- `IndexedSource` and `IndexProgress`: a source that keeps an index of the agent's files, and
  how far its build has come (what the host shows while a person or a client waits);
  `report_index_progress` tells a build's progress to the front end.
- `PagedSource`: a source that answers pages of its listing by last activity and of a
  conversation itself (`dsh web`), instead of having them cut from its whole listing or surface.
  `surface_page` gathers such a page from a source's own rows.
- `SourceProblems`: a source that says what is wrong with how it is set up (`dsh config`,
  `dsh sessions check`).
- `SourceFileReport`: a file with lines a source could not read (`dsh sessions check`);
  `SourceReadOnly`: the refusal of a write. The protocol a source implements,
  `SessionSource`, is exported from `dsh_host` itself, beside `SessionStore`.
- `SourceConversation` and `SourceMessage`: a source session's current conversation, and the
  dsh log, surface and texts synthesized from it.
- `SearchQuery`: what a candidate search query means (name and body matches, snippets, rank
  order), for a source that answers searches itself.
- `BodyScorer` and `BodyTextScoring`: one relevance measure across store and sources: a store
  that scores a text it does not hold on its own scale, and the scorer a source is handed.

The modules below this package (`base`, `registry`, `synthesis`, `ranking`) are private.
"""

from dsh_host.sources.base import (
    BodyScorer,
    IndexedSource,
    IndexProgress,
    PagedSource,
    SourceFileReport,
    SourceProblems,
    SourceReadOnly,
    report_index_progress,
)
from dsh_host.sources.registry import SessionSources
from dsh_host.sources.synthesis import SourceConversation, SourceMessage
from dsh_host.store.pages import surface_page
from dsh_host.store.relevance import BodyTextScoring
from dsh_host.store.search import SearchQuery

__all__ = [
    "BodyScorer",
    "BodyTextScoring",
    "IndexProgress",
    "IndexedSource",
    "PagedSource",
    "SearchQuery",
    "SessionSources",
    "SourceConversation",
    "SourceFileReport",
    "SourceMessage",
    "SourceProblems",
    "SourceReadOnly",
    "report_index_progress",
    "surface_page",
]
