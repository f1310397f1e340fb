"""The `session_html` service: the static HTML page of a session, for `dsh sessions export --html`."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from dsh_host.errors import DshError

if TYPE_CHECKING:
    from dsh_host.query import SessionQuery

EXTRA_MISSING = "the static HTML page needs the web extra: pip install 'dsh-host[web]'"


def lacks(*modules: str) -> bool:
    """Whether any of `modules` (of the extra `dsh-host[web]`) cannot be imported here."""
    return any(importlib.util.find_spec(name) is None for name in modules)


class SessionHtml:
    """Renders the static page of a session read through session query."""

    def __init__(self, query: SessionQuery) -> None:
        self._query = query

    async def page(self, session_id: str) -> str:
        """The page of `session_id` (`SessionNotFound` when it cannot be read)."""
        if lacks("jinja2", "markdown_it"):
            raise DshError(EXTRA_MISSING)
        from dsh_host.web.export import ExportPage, export_html
        from dsh_host.web.reads import all_entries

        newest, entries = await all_entries(self._query, session_id)
        page = ExportPage(
            session_id, newest.title, self._query.agent_name(session_id), newest.header.cwd, newest.header.created_at
        )
        return export_html(page, entries)
