"""`dsh web` in a real browser: list, filter, search, open, page back, copy, preview, live, export.

Every test runs `dsh web` as a process on a data dir the test filled, and drives Debian's
Chromium through Playwright; the waits are for what the page shows, never for a time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from dsh_host import Event, Host
from dsh_host.session.jsonl import export_lines
from dsh_host.testing import LogBuilder
from dsh_session_reference import encode_uri, format_mention
from tests.web.browser import watched_page
from tests.web.server import dsh_web
from tests.web.sessions import HOSTILE_TEXT, conversation, store_log

DAY = 1_780_000_000_000
"""A morning in June 2026, in ms: the sessions' times (the screenshots show them)."""


THREE = (
    ("alpha", "how do I parse toml", "use tomllib", "Parse TOML", "/work/alpha"),
    ("beta", "rename the module", "done", "Rename module", "/work/beta"),
    ("gamma", "fix the flaky test", "it waits now", "Flaky test", "/work/alpha"),
)
"""Three sessions, each created and active a little after the one before."""


def three_sessions(host: Host) -> None:
    for n, (session_id, question, answer, title, cwd) in enumerate(THREE, start=1):
        raws = conversation((question, answer), time=DAY + n * 1_000_000, title=title)
        store_log(host, session_id, raws, created_at=DAY + n * 1_000, cwd=cwd)


def second_turn(pair: tuple[str, str], *, time: int) -> list[Event]:
    """The events of a second turn of a session `conversation` made with a title (seqs from 7)."""
    raws = conversation(pair, time=time)
    for raw in raws:
        raw["seq"] = int(raw["seq"]) + 7  # type: ignore[call-overload]
        data = raw["data"]
        if isinstance(data, dict) and "turn" in data:
            data["turn"] = 2
    return LogBuilder.events(raws)


def copy(page: Page, label: str) -> str:
    """Click the copy button labelled `label`; what the clipboard holds once the page says it copied."""
    button = page.locator(f"button.copy:has-text('{label}')")
    button.click()
    expect(button).to_have_class(re.compile(r"\bcopied\b"))
    return str(page.evaluate("navigator.clipboard.readText()"))


def titles(page) -> list[str]:
    return page.locator("tr.session td.title a").all_inner_texts()


def test_list_filter_search_and_open(web_host: Host, browser: Browser, tmp_path: Path) -> None:
    three_sessions(web_host)
    with dsh_web(web_host.data_dir, tmp_path) as served, watched_page(browser, served.origin) as (page, _):
        page.goto(served.url)
        expect(page.locator("tr.session").first).to_contain_text("Flaky test")
        assert titles(page) == ["Flaky test", "Rename module", "Parse TOML"]
        time = page.locator("tr.session").first.locator("time").last
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", time.get_attribute("title") or "")
        page.select_option("#cwd", "/work/alpha")
        page.click("form.filters button")
        expect(page.locator("tr.session")).to_have_count(2)
        assert titles(page) == ["Flaky test", "Parse TOML"]
        page.select_option("#agent", "dsh")
        page.click("form.filters button")
        expect(page.locator("tr.session")).to_have_count(2)

        page.fill("header input[name=q]", "tomllib")
        page.press("header input[name=q]", "Enter")
        expect(page.locator("tr.session")).to_have_count(1)
        expect(page.locator("tr.snippet mark")).to_have_text("tomllib")
        page.fill("main input[name=q]", "nothing-says-this")
        page.click("main form button")
        expect(page.locator("#no-match")).to_contain_text("No session matches")

        page.goto(served.origin + "/")
        page.click("text=Rename module")
        expect(page.locator("h1")).to_have_text("Rename module")
        expect(page.locator("li.msg-user .body")).to_have_text("rename the module")
        expect(page.locator("li.msg-assistant .body")).to_have_text("done")


def test_copy_a_mention_and_see_what_it_brings(web_host: Host, browser: Browser, tmp_path: Path) -> None:
    three_sessions(web_host)
    with dsh_web(web_host.data_dir, tmp_path) as served, watched_page(browser, served.origin) as (page, _):
        page.goto(served.url)
        page.click("text=Parse TOML")
        for button, copied in (
            ("Copy mention", format_mention("alpha", "Parse TOML")),
            ("Copy URI", encode_uri("alpha")),
            ("dsh chat", "dsh chat --session alpha"),
        ):
            assert copy(page, button) == copied

        page.click("text=What a mention brings")
        snapshot = page.locator("#snapshot")
        expect(snapshot).to_contain_text("use tomllib")
        expect(snapshot).to_contain_text("<referenced-sessions")
        expect(page.locator("table.budget tbody tr")).to_have_count(1)
        expect(page.locator("table.budget tbody td").nth(2)).to_have_text("2 of 2")


def test_a_live_session_shows_new_messages_and_moves_to_the_top(
    web_host: Host, browser: Browser, tmp_path: Path
) -> None:
    three_sessions(web_host)
    with dsh_web(web_host.data_dir, tmp_path) as served, watched_page(browser, served.origin) as (page, _):
        page.goto(served.url)
        page.click("text=Parse TOML")
        expect(page.locator("li.msg")).to_have_count(2)
        header = LogBuilder.header("alpha", created_at=DAY + 1_000, cwd="/work/alpha")
        web_host.store.append(header, second_turn(("one more question", "one more answer"), time=DAY + 9_000_000))
        expect(page.locator("li.msg")).to_have_count(4)
        expect(page.locator("li.msg").last).to_contain_text("one more answer")

        page.goto(served.origin + "/")
        expect(page.locator("tr.session").first).to_contain_text("Parse TOML")
        header = LogBuilder.header("beta", created_at=DAY + 2_000, cwd="/work/beta")
        web_host.store.append(header, second_turn(("beta again", "ok"), time=DAY + 20_000_000))
        expect(page.locator("tr.session").first).to_contain_text("Rename module")


def test_export_the_log_and_a_static_page(web_host: Host, browser: Browser, tmp_path: Path) -> None:
    three_sessions(web_host)
    with dsh_web(web_host.data_dir, tmp_path) as served, watched_page(browser, served.origin) as (page, _):
        page.goto(served.url)
        page.click("text=Flaky test")
        with page.expect_download() as got:
            page.click("text=Export log (JSONL)")
        # Byte for byte what `dsh sessions export gamma` writes.
        assert Path(got.value.path()).read_text(encoding="utf-8") == "".join(
            export_lines(*web_host.store.read_lines("gamma"))
        )
        with page.expect_download() as got:
            page.click("text=Export page (HTML)")
        exported = tmp_path / "flaky.html"
        got.value.save_as(exported)
        page.goto(exported.as_uri())
        expect(page.locator("h1")).to_have_text("Flaky test")
        expect(page.locator("li.msg-assistant")).to_contain_text("it waits now")
        assert page.locator("script").count() == 0


def test_page_backward_through_a_200000_event_session(web_host: Host, browser: Browser, tmp_path: Path) -> None:
    from bench.store import compacted_session, persist

    persist(web_host, "big", compacted_session(200_000))  # 2,000 on the surface, one a checkpoint
    with dsh_web(web_host.data_dir, tmp_path) as served, watched_page(browser, served.origin) as (page, _):
        page.goto(served.url)
        page.click("tr.session td.title a")
        messages = page.locator("li.msg")
        expect(messages).to_have_count(200)
        expect(messages.last).to_contain_text("record 1999 ")
        pages = 1
        while page.locator("#older").count():
            first = messages.first.get_attribute("data-position")
            page.click("#older")
            expect(messages.first).not_to_have_attribute("data-position", first or "")
            pages += 1
        assert pages == 10
        expect(messages.first).to_have_class(re.compile("msg-checkpoint"))
        expect(messages.first.locator("details")).not_to_have_attribute("open", "")
        messages.first.locator("summary").click()
        expect(messages.first.locator(".body")).to_contain_text("<summary>…</summary>")


def test_a_hostile_session_stays_text(web_host: Host, browser: Browser, tmp_path: Path) -> None:
    raws = conversation((HOSTILE_TEXT, HOSTILE_TEXT), title=HOSTILE_TEXT, steer=HOSTILE_TEXT)
    store_log(web_host, "evil<script>\u202e", raws, created_at=1, cwd="/tmp/<b>\u202e")
    with dsh_web(web_host.data_dir, tmp_path) as served, watched_page(browser, served.origin) as (page, _):
        page.goto(served.url)
        expect(page.locator("tr.session td.title a")).to_contain_text("<script>alert('x')</script>")
        page.locator("tr.session td.title a").click()
        body = page.locator("li.msg-user .body").first
        expect(body).to_contain_text("<script>alert('x')</script> </li></ol><b>bold?</b>")
        expect(body).to_contain_text("\\x1b]0;owned\\x07")
        expect(body).to_contain_text("\\u202egnp.exe\\u202c")
        expect(body).to_contain_text("lone \\udc00 surrogate")
        expect(page.locator("li.msg-steering")).to_have_count(1)
        assert page.locator("li.msg img, li.msg script").count() == 0
        copied = copy(page, "Copy mention")
        assert copied.startswith("@[<script>") and "\u202e" in copied  # exact, as `dsh ref mention` prints it
        page.click("text=What a mention brings")
        expect(page.locator("#snapshot")).to_contain_text("\\u202egnp.exe")
        page.click("text=Full log")
        expect(page.locator("li.event")).not_to_have_count(0)
        with page.expect_download() as got:
            page.click("text=Export page (HTML)")
        exported = tmp_path / "evil.html"
        got.value.save_as(exported)
        page.goto(exported.as_uri())
        expect(page.locator("li.msg-user .body").first).to_contain_text("<script>alert('x')</script>")


def test_screenshots_light_and_dark_at_two_widths(web_host: Host, browser: Browser, tmp_path: Path) -> None:
    three_sessions(web_host)
    shots = Path(os.environ.get("DSH_WEB_SCREENSHOTS", tmp_path))
    with dsh_web(web_host.data_dir, tmp_path) as served:
        for dark in (False, True):
            for width, height in ((1280, 800), (390, 844)):
                with watched_page(browser, served.origin, dark=dark, width=width, height=height) as (page, _):
                    page.goto(served.url)
                    expect(page.locator("tr.session")).to_have_count(3)
                    scheme = "dark" if dark else "light"
                    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
                    assert (background == "rgb(23, 24, 26)") is dark
                    page.screenshot(path=str(shots / f"web-list-{scheme}-{width}.png"))
                    page.click("text=Parse TOML")
                    expect(page.locator("li.msg")).to_have_count(2)
                    page.screenshot(path=str(shots / f"web-session-{scheme}-{width}.png"))
    assert len(list(shots.glob("web-*.png"))) >= 8
