"""A session whose text tries every injection renders inert and visible everywhere it is shown."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from dsh_host import Host
from dsh_host.cli.sessions import export
from dsh_host.web.text import markdown_html, visible_text
from dsh_session_reference import encode_uri
from tests.web.sessions import HOSTILE_TEXT, conversation, store_log

HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile(host: Host) -> str:
    """Store the hostile session (its id, title, cwd and messages all hostile); its URI."""
    session_id = "evil<script>\u202e\x1b"
    raws = conversation((HOSTILE_TEXT, HOSTILE_TEXT), title=HOSTILE_TEXT, steer=HOSTILE_TEXT)
    store_log(host, session_id, raws, created_at=1, cwd="/tmp/<b>\u202e")
    return encode_uri(session_id)


class Markup(HTMLParser):
    """The elements and attributes of a page, as a browser's parser finds them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    """No markup or hidden character of the session's text survives in `html`; the text shows."""
    parser = Markup()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert tag not in ("img", "iframe", "object", "embed", "b"), tag
        assert tag != "script" or attrs == {"src": "/static/app.js", "defer": None}, attrs
        assert not any(name.startswith("on") for name in attrs), attrs
        for name in ("href", "src", "action"):
            target = attrs.get(name)
            # A Markdown link may lead anywhere a person chooses to go; nothing loads from elsewhere.
            elsewhere = tag == "a" and name == "href" and target is not None and target.startswith("http")
            assert target is None or elsewhere or target.startswith(("/", "?")), attrs
    assert not HIDDEN.search(html)
    html.encode("utf-8")  # no lone surrogate
    for visible in ("&lt;script&gt;", "\\x1b]0;owned\\x07", "\\u202egnp.exe\\u202c", "\\udc00"):
        assert visible in html, visible


def test_every_page_of_a_hostile_session_is_inert(web_host: Host, client: TestClient) -> None:
    uri = hostile(web_host)
    for path in ("/", f"/s/{uri}", f"/s/{uri}/preview", f"/s/{uri}/export.html", "/search?q=surrogate"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert_inert(answer.text)
    log = client.get(f"/s/{uri}/log").text
    assert "&lt;script&gt;" in log and "<script>alert" not in log and not HIDDEN.search(log)


def test_the_static_export_of_a_hostile_session_is_inert(web_host: Host, tmp_path) -> None:
    hostile(web_host)
    out = tmp_path / "page.html"
    # `dsh sessions export` itself, on a host with the web plugin mounted.
    result = CliRunner().invoke(export, ["--html", "evil<script>\u202e\x1b", "-o", str(out)], obj=web_host)
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert_inert(page)
    assert "<script" not in page.lower().replace("&lt;script", "")


@given(st.text(alphabet=st.characters(codec=None, categories=None), max_size=60))
def test_any_text_renders_without_markup_or_hidden_characters(text: str) -> None:
    for html in (markdown_html(text), visible_text(text)):
        html.encode("utf-8")
        assert not HIDDEN.search(html)
        assert "<script" not in html and "<img" not in html and '<a href="javascript' not in html
