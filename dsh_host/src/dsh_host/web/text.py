"""Session text on its way into HTML: made visible and inert before any markup sees it.

Jinja2's autoescape takes care of `<`, `&` and quotes; what it leaves are characters that are
harmless to the parser but not to the reader: control characters (a terminal escape copied out
of a page), bidirectional overrides and isolates (text that reads differently from what it is),
and lone surrogates (which UTF-8 cannot encode at all). Each is written as a visible escape
(`\\x1b`, `\\u202e`, `\\udc00`), so the reader sees that it is there.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markupsafe import Markup

from dsh_host.text import escape_lone_surrogates

# C0 controls but TAB and LF, DEL and C1; the Unicode bidi controls (marks, embeddings,
# overrides, isolates); line and paragraph separators, which some readers take for line ends.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible_text(text: str) -> str:
    """`text` with control, bidi and separator characters and lone surrogates as visible escapes."""
    return escape_lone_surrogates(_HIDDEN.sub(_visible, text))


def exact_attribute(text: str) -> Markup:
    """`text` escaped for an attribute value that must read back exactly (a filter's value, what a
    button copies): hidden characters as numeric references, so the page's source shows none of
    them raw while the browser's value is `text` itself (a lone surrogate, which no page can
    carry, is written `\\udXXX`)."""
    escaped = str(Markup.escape(escape_lone_surrogates(text)))
    return Markup(_HIDDEN.sub(lambda match: f"&#x{ord(match.group()):x};", escaped))


def _markdown() -> MarkdownIt:
    # CommonMark with raw HTML off (it is shown as text); images off, since an image would load
    # from wherever the text points. Links keep markdown-it's own check, which drops
    # `javascript:`, `vbscript:`, `file:` and `data:` targets.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    return md


_MARKDOWN = _markdown()


def markdown_html(text: str) -> str:
    """Markdown of a message as HTML: raw HTML and images shown as text, unsafe links dropped."""
    html: str = _MARKDOWN.render(visible_text(text))
    return html
