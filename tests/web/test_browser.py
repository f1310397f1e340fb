"""`dsh web` in a real browser: list, filter, search, open, page back, copy, preview, live, export.

Every test runs `dsh web` as a process on a data dir the test filled, and drives Debian's
Chromium through Playwright; the waits are for what the page shows, never for a time.
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, expect

from dsh_host import Event, Host
from dsh_host.session.jsonl import export_lines
from dsh_host.testing import LogBuilder
from dsh_session_reference import encode_uri, format_mention
from tests.web.browser import watched_page
from tests.web.server import dsh_web
from tests.web.sessions import conversation, store_log


def three_sessions(host: Host) -> None:
    store_log(
        host,
        "alpha",
        conversation(("how do I parse toml", "use tomllib"), time=1_000, title="Parse TOML"),
        created_at=1_000,
        cwd="/work/alpha",
    )
    store_log(
        host,
        "beta",
        conversation(("rename the module", "done"), time=2_000, title="Rename module"),
        created_at=2_000,
        cwd="/work/beta",
    )
    store_log(
        host,
        "gamma",
        conversation(("fix the flaky test", "it waits now"), time=3_000, title="Flaky test"),
        created_at=3_000,
        cwd="/work/alpha",
    )


def second_turn(pair: tuple[str, str], *, time: int) -> list[Event]:
    """The events of a second turn of a session `conversation` made with a title (seqs from 7)."""
    raws = conversation(pair, time=time)
    for raw in raws:
        raw["seq"] = int(raw["seq"]) + 7  # type: ignore[call-overload]
        data = raw["data"]
        if isinstance(data, dict) and "turn" in data:
            data["turn"] = 2
    return LogBuilder.events(raws)


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
        page.click("button:has-text('Copy mention')")
        expect(page.locator("button.copy").first).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == format_mention("alpha", "Parse TOML")
        page.click("button:has-text('Copy URI')")
        assert page.evaluate("navigator.clipboard.readText()") == encode_uri("alpha")
        page.click("button:has-text('dsh chat')")
        assert page.evaluate("navigator.clipboard.readText()") == "dsh chat --session alpha"

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
        header = LogBuilder.header("alpha", created_at=1_000, cwd="/work/alpha")
        web_host.store.append(header, second_turn(("one more question", "one more answer"), time=9_000))
        expect(page.locator("li.msg")).to_have_count(4)
        expect(page.locator("li.msg").last).to_contain_text("one more answer")

        page.goto(served.origin + "/")
        expect(page.locator("tr.session").first).to_contain_text("Parse TOML")
        header = LogBuilder.header("beta", created_at=2_000, cwd="/work/beta")
        web_host.store.append(header, second_turn(("beta again", "ok"), time=20_000))
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
