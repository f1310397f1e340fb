"""What the templates show, made from session query's records: text made inert, times readable.

Every string from a session passes `visible_text` (or, for a message, `markdown_html`) here;
the templates add only markup and Jinja2's autoescape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from markupsafe import Markup

from dsh_host.text import iso_utc
from dsh_host.web.text import markdown_html, visible_text

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue
    from dsh_host.paging import SurfaceEntry


@dataclass(frozen=True)
class When:
    """A time as the page shows it: local, to the minute, with the exact ISO time as a tooltip."""

    local: str
    iso: str

    def __html__(self) -> str:
        """Its `<time>` element, which every page writes the same way (Jinja2 calls this)."""
        return str(Markup('<time datetime="{0}" title="{0}">{1}</time>').format(self.iso, self.local))


@lru_cache(maxsize=8_192)
def when(ms: int | float | None) -> When | None:
    """`ms` (since the epoch) in the machine's local time zone; None stays None (kept: a listing
    shows the same sessions' times on every refresh)."""
    if ms is None:
        return None
    local = datetime.fromtimestamp(ms / 1000).astimezone()
    return When(local.strftime("%Y-%m-%d %H:%M"), iso_utc(ms))


def shown(text: str | None, absent: str) -> str:
    """`text` made visible, or `absent` when there is none (an untitled session, dsh's own agent)."""
    return visible_text(text) if text else absent


def heading(
    session_id: str, title: str | None, agent: str | None, cwd: str | None, created_at: int | float
) -> dict[str, object]:
    """What a session's pages and its static export show above its messages, made inert."""
    return {
        "sid": visible_text(session_id),
        "title": shown(title, "(untitled)"),
        "agent": shown(agent, "dsh"),
        "cwd": shown(cwd, "(no cwd)"),
        "created": when(created_at),
    }


@dataclass(frozen=True)
class Row:
    """A session in a listing or a search result."""

    id: str
    uri: str
    title: str
    agent: str
    cwd: str
    created: When | None
    active: When | None
    snippet: Markup | None


def row(
    session_id: str,
    uri: str,
    title: str | None,
    agent: str | None,
    cwd: str | None,
    created_at: int | float,
    last_activity_at: int | float | None,
    snippet: str | None = None,
    words: tuple[str, ...] = (),
) -> Row:
    """A row for the templates; `words` are highlighted in the snippet."""
    return Row(
        visible_text(session_id),
        uri,
        shown(title, "(untitled)"),
        shown(agent, "dsh"),
        shown(cwd, "(no cwd)"),
        when(created_at),
        when(last_activity_at),
        None if snippet is None else highlight(visible_text(snippet), words),
    )


def highlight(text: str, words: tuple[str, ...]) -> Markup:
    """`text` escaped, with each case-insensitive occurrence of `words` in a `<mark>`."""
    lowered = text.casefold()
    needles = [w.casefold() for w in words if w]
    # A fold that changes the length (`ß` to `ss`) would put the marks at the wrong offsets.
    if len(lowered) != len(text) or not needles:
        return Markup.escape(text)
    out: list[str] = []
    at = 0
    while at < len(text):
        hits = [(lowered.find(n, at), n) for n in needles]
        hits = [(i, n) for i, n in hits if i >= 0]
        if not hits:
            break
        start, needle = min(hits, key=lambda hit: (hit[0], -len(hit[1])))
        out.append(Markup.escape(text[at:start]))
        out.append(Markup("<mark>%s</mark>") % text[start : start + len(needle)])
        at = start + len(needle)
    out.append(Markup.escape(text[at:]))
    return Markup("").join(out)


@dataclass(frozen=True)
class Message:
    """A surface entry as the page shows it: its kind, label, Markdown as HTML, and when."""

    position: int
    seq: int
    kind: str
    label: str
    html: Markup
    time: When | None


def message(entry: SurfaceEntry) -> Message:
    """An entry as a `Message`: a plugin's message is labelled with the plugin's name."""
    label = visible_text(entry.kind)
    if entry.kind in ("user", "steering") and entry.source_kind == "plugin" and entry.source_plugin:
        label = f"{label} (from {visible_text(entry.source_plugin)})"
    # markdown_html escapes the text itself (raw HTML is off): its output is markup.
    return Message(entry.position, entry.seq, entry.kind, label, Markup(markdown_html(entry.text)), when(entry.time))


@dataclass(frozen=True)
class LogEvent:
    """An event of the full log: its seq and type, a line saying what it is, and its JSON."""

    seq: int
    type: str
    surface: bool
    summary: str
    json: str
    time: When | None


def log_event(event: dict[str, JsonValue]) -> LogEvent:
    """An event in log form for the log view (every string inert)."""
    seq, time, kind = event.get("seq"), event.get("time"), event.get("type")
    data = event.get("data")
    summary = ""
    if isinstance(data, dict):
        content = data.get("content")
        if isinstance(content, list):
            summary = " ".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, dict) and b.get("type") in ("text", "reasoning")
            )
        elif kind == "tool/call":
            summary = f"{data.get('name')}({data.get('arguments')})"
        elif kind == "session/title":
            summary = str(data.get("title", ""))
        elif kind == "assistant/chunk" and isinstance(data.get("chunk"), dict):
            chunk = data["chunk"]
            summary = str(chunk.get("text") or chunk.get("argumentsDelta") or chunk.get("type", ""))
    if len(summary) > 200:
        summary = summary[:199] + "…"
    return LogEvent(
        seq if isinstance(seq, int) else -1,
        visible_text(str(kind)),
        event.get("surfaceOp") is not None,
        visible_text(summary),
        visible_text(json.dumps(event, ensure_ascii=False, indent=1)),
        when(time if isinstance(time, (int, float)) else None),
    )
