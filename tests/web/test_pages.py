"""The pages over a store of hand-written sessions, read through the guarded app."""

from __future__ import annotations

import re

from dsh_host import Host, hookimpl
from dsh_host.testing import LogBuilder
from dsh_session_reference import encode_uri
from tests.web.sessions import conversation, store_log


def test_the_list_shows_sessions_newest_activity_first(web_host: Host, client) -> None:
    store_log(web_host, "old", conversation(("first", "one"), time=5_000, title="Old one"), created_at=1_000, cwd="/a")
    store_log(web_host, "new", conversation(("second", "two"), time=2_000, title="New one"), created_at=2_000, cwd="/b")
    page = client.get("/").text
    # "old" was created first but was active last.
    assert page.index("Old one") < page.index("New one")
    assert "/b" in page and 'title="1970-01-01T00:00:05.006Z"' in page


def test_the_list_and_search_show_what_they_read_on_every_view(web_host: Host, client) -> None:
    # The pages keep rendered rows and directory options: a changed record must render anew.
    raws = conversation(("the zanzibar parser", "fixed"), time=1_000, title="Before")
    store_log(web_host, "s", raws, created_at=1, cwd="/a")
    views = ("/", "/rows", "/search?q=zanzibar")
    assert all("Before" in client.get(view).text for view in views)
    assert 'value="/new"' not in client.get("/").text
    n = len(raws)
    user = {"kind": "message", "source": {"kind": "user"}}
    renamed = [
        LogBuilder.raw("turn/start", n, {"turn": 2, "trigger": user}, time=9_000),
        LogBuilder.raw("session/title", n + 1, {"title": "After", "messageSeqs": [1], "source": {"kind": "fallback"}}),
        LogBuilder.raw("turn/end", n + 2, {"turn": 2, "reason": {"kind": "completed"}}, time=9_002),
    ]
    web_host.store.append(LogBuilder.header("s", created_at=1, cwd="/a"), LogBuilder.events(renamed))
    store_log(web_host, "t", conversation(("elsewhere", "yes"), title="Newcomer"), created_at=2, cwd="/new")
    for view in views:
        page = client.get(view).text
        assert "After" in page and "Before" not in page, view
    listed = client.get("/").text
    assert "Newcomer" in listed and 'value="/new"' in listed
    assert 'value="/a" selected' in client.get("/?cwd=/a").text


def test_a_session_page_shows_its_messages(web_host: Host, client) -> None:
    store_log(web_host, "s1", conversation(("what is *this*", "it is **bold**"), title="T"), created_at=1, cwd="/a")
    page = client.get(f"/s/{encode_uri('s1')}")
    assert page.status_code == 200
    assert "<strong>bold</strong>" in page.text and "<em>this</em>" in page.text


def test_export_html_needs_one_session_and_the_web_plugin(make_host, tmp_path) -> None:
    from click.testing import CliRunner

    from dsh_host.cli.sessions import export

    bare = make_host(["session-reference"])
    store_log(bare, "s", conversation(("q", "a")), created_at=1, cwd="/a")
    result = CliRunner().invoke(export, ["--html", "s"], obj=bare)
    assert "needs the web plugin" in str(result.exception)
    result = CliRunner().invoke(export, ["--html", "--all"], obj=bare)
    assert "--html" in str(result.exception)


class Panels:
    """A plugin adding two panels to every session page, one of them hostile."""

    @hookimpl
    async def dsh_web_session_panels(self, session_id: str) -> list[tuple[str, str]]:
        return [("Checkpoints of " + session_id, "none yet"), ("<b>x</b>\u202e", "<script>alert(1)</script>\x1b")]


class Broken:
    @hookimpl
    def dsh_web_session_panels(self, host: Host) -> list[tuple[str, str]]:
        raise RuntimeError("broken panel")


def test_plugins_add_panels_as_inert_text_and_a_failing_one_is_left_out(make_host) -> None:
    from starlette.testclient import TestClient

    import dsh_host.web
    from tests.web.conftest import BASE, TOKEN, guarded

    host = make_host(["session-reference"], objects={"web": dsh_host.web, "panels": Panels(), "broken": Broken()})
    store_log(host, "s1", conversation(("q", "a")), created_at=1, cwd="/a")
    with TestClient(guarded(host), base_url=BASE) as client:
        page = client.get(f"/s/{encode_uri('s1')}?token={TOKEN}").text
    assert '<details class="panel"><summary>Checkpoints of s1</summary><pre>none yet</pre></details>' in page
    assert "<summary>&lt;b&gt;x&lt;/b&gt;\\u202e</summary><pre>&lt;script&gt;alert(1)&lt;/script&gt;\\x1b</pre>" in page
    assert "broken panel" not in page


def test_the_static_page_allows_its_own_style_by_hash_and_nothing_else(web_host: Host, client) -> None:
    import base64
    import hashlib
    import html
    import re

    store_log(web_host, "s1", conversation(("q", "*a*")), created_at=1, cwd="/a")
    page = client.get(f"/s/{encode_uri('s1')}/export.html").text
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    (style,) = re.findall(r"<style>(.*?)</style>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    expected = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    assert html.unescape(policy) == expected
    assert "<script" not in page and "<em>a</em>" in page


def test_search_prefers_the_given_directory_and_says_when_nothing_matches(web_host: Host, client) -> None:
    store_log(web_host, "here", conversation(("the parser fails", "fixed")), created_at=1, cwd="/here")
    store_log(web_host, "there", conversation(("the parser fails", "fixed")), created_at=2, cwd="/there")
    for cwd, first in (("/here", "here"), ("/there", "there")):
        page = client.get("/search", params={"q": "parser", "cwd": cwd}).text
        ids = re.findall(r'<tr class="session" data-id="([^"]+)">', page)
        assert ids[0] == first and len(ids) == 2
        assert "<mark>parser</mark>" in page
    assert "No session matches “zebra”" in client.get("/search?q=zebra").text


def test_the_full_log_pages_backward_by_seq(web_host: Host, client) -> None:
    from dsh_host.web.app import LOG_PAGE

    pairs = [(f"question {n}", f"answer {n}") for n in range(LOG_PAGE // 6 + 10)]
    raws = conversation(*pairs)
    store_log(web_host, "long", raws, created_at=1, cwd="/a")
    first = client.get(f"/s/{encode_uri('long')}/log").text
    seqs = [int(n) for n in re.findall(r'<span class="seq">#(\d+)</span>', first)]
    assert seqs == list(range(len(raws) - LOG_PAGE, len(raws)))
    (older,) = re.findall(r'href="/s/[^"?]+/log\?before_seq=(\d+)"', first)
    second = client.get(f"/s/{encode_uri('long')}/log", params={"before_seq": older}).text
    assert [int(n) for n in re.findall(r'<span class="seq">#(\d+)</span>', second)] == list(range(int(older)))
    assert "before_seq=" not in second
