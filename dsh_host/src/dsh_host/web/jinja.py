"""The pages' Jinja2 environment: every template autoescaped, whatever its name."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from dsh_host.web.text import exact_attribute

LIVE_POLL_MS = 1000
"""How often an open page asks for what is new."""


@cache
def templates() -> Environment:
    """The environment the pages and the static export render with: one per process, so each
    template is parsed once, not again on every static export."""
    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        # The templates ship with the package: no page needs to stat them again to see if they changed.
        auto_reload=False,
    )
    env.globals["live_poll_ms"] = LIVE_POLL_MS
    env.filters["exact"] = exact_attribute
    return env
