"""A session exported: its log as `dsh sessions export` writes it, and a static HTML page.

The static page is one self-contained file to keep or share: its surface as the session page
shows it (Markdown rendered with raw HTML off, checkpoint summaries folded with `<details>`),
no script at all, its one style inline, and a Content-Security-Policy in a `<meta>` tag that
allows that style by its hash and nothing else: opened anywhere, it loads nothing and runs
nothing, whatever the session's text says.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_host.web.jinja import templates
from dsh_host.web.views import heading, message

if TYPE_CHECKING:
    from dsh_host.paging import SurfaceEntry
    from dsh_host.session.events import SessionHeader

STATIC = Path(__file__).parent / "static"
STYLE = "".join((STATIC / name).read_text(encoding="utf-8") for name in ("messages.css", "export.css"))
"""The page's one style: the messages' look the web pages share, then the page's own."""


@dataclass(frozen=True)
class ExportPage:
    """What the static page says about its session above the messages (raw: made inert here)."""

    session_id: str
    title: str | None
    agent: str | None
    cwd: str | None
    created_at: int | float


def style_policy(style: str) -> str:
    """The page's Content-Security-Policy: `style` (by its SHA-256) and nothing else."""
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


def export_html(page: ExportPage, entries: list[SurfaceEntry]) -> str:
    """The static HTML page of a session whose surface entries are `entries`."""
    return (
        templates()
        .get_template("export.html")
        .render(
            policy=style_policy(STYLE),
            style=STYLE,
            **heading(page.session_id, page.title, page.agent, page.cwd, page.created_at),
            messages=[message(e) for e in entries],
        )
    )


def export_log(header: SessionHeader, lines: list[str]) -> str:
    """A session's log as `dsh sessions export` writes it: its header line, then one event a line."""
    from dsh_host.session.jsonl import export_lines

    return "".join(export_lines(header, lines))
