"""The `gemini-cli` source through the `dsh` command and a host: where it looks, what it lists, reads and checks.

The plugin is installed here as a distribution on `sys.path` naming the entry point
`gemini-cli = dsh_sources.gemini_cli` (as `pip install ./dsh_sources` does), and the agent's
folder is a copy of the test data (`data/gemini_cli/`), found through `GEMINI_CLI_HOME`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from dsh_host.testing import HostFactory, private_homes
from dsh_sources import gemini_cli
from tests.dsh_sources.conftest import tree_state
from tests.dsh_sources.gemini_builders import GeminiChat, slug_folder

pytestmark = pytest.mark.foreign_logs  # an imported copy is a synthesized log (surface events, no turns)

DATA = Path(__file__).with_name("data") / "gemini_cli"
HASHED = "gemini-cli:11111111-aaaa-4aaa-8aaa-000000000001"
TWIN = "gemini-cli:22222222-bbbb-4bbb-8bbb-000000000002"
REGISTERED = "gemini-cli:44444444-dddd-4ddd-8ddd-000000000004"
MODERN = "gemini-cli:66666666-ffff-4fff-8fff-000000000006"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `gemini-cli` entry point, installed in a site folder of this test."""
    info = tmp_path / "site" / "dsh_gemini_entry-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-gemini-entry\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[dsh]\n{gemini_cli.NAME} = dsh_sources.gemini_cli\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A copy of the test data's home (its `.gemini` folder), times kept."""
    copy = tmp_path / "gemini-home"
    shutil.copytree(DATA, copy)
    return copy


@pytest.fixture
def cli(dsh_cli, installed, home):
    dsh_cli.plugins = ["session-reference", "compact", "gemini-cli"]
    dsh_cli.env.update({"GEMINI_CLI_HOME": str(home)})
    return dsh_cli


def test_list_search_show_and_check_answer_from_every_layout(cli, home):
    code, out, err = cli("sessions", "list", "--json")
    assert code == 0, err
    rows = {row["id"]: row for row in map(json.loads, out.splitlines())}
    assert sorted(rows) == [HASHED, TWIN, REGISTERED, MODERN]
    assert {row["agent"] for row in rows.values()} == {"Gemini CLI"}
    assert (rows[HASHED].get("cwd"), rows[HASHED]["title"]) == (None, "Fix the arm64 build")
    assert (rows[REGISTERED]["cwd"], rows[MODERN]["cwd"]) == ("/work/registered", "/work/modern")
    code, out, _ = cli("sessions", "list")
    assert code == 0 and f"{MODERN}  " in out and "Gemini CLI · Speed up the importer" in out
    # Of the legacy file and its .jsonl twin, the one updated last (as Gemini would resume it) serves the id.
    code, out, _ = cli("sessions", "show", TWIN)
    assert code == 0 and "user/message +  now update the docs" in out
    code, out, _ = cli("sessions", "search", "streaming parser")
    assert out.splitlines()[0].startswith(MODERN)
    code, out, _ = cli("sessions", "show", MODERN)
    assert "checkpoint" in out.splitlines()[1] and "profile the importer" not in out
    code, out, _ = cli("sessions", "check", "--source", "gemini-cli")
    chats = home / ".gemini" / "tmp" / "modern" / "chats"
    assert code == 0
    assert sorted(out.splitlines()) == [
        f"gemini-cli  {chats / 'session-2026-07-20T00-00-66666666.jsonl'}  2 skipped lines",
        f"gemini-cli  {chats / 'session-2026-07-21T00-00-88888888.json'}  1 skipped line",
    ]


def test_nothing_under_the_gemini_folder_is_ever_written(cli, home):
    before = tree_state(home)
    for args in (
        ("sessions", "list"),
        ("sessions", "search", "importer"),
        ("sessions", "show", MODERN),
        ("sessions", "export", TWIN),
        ("sessions", "check"),
    ):
        assert cli(*args).exit_code == 0
    assert tree_state(home) == before
    assert tree_state(DATA) == tree_state(home)


def test_a_preview_frames_a_gemini_snapshot(cli):
    cli("run", "hello")
    listing = [json.loads(line) for line in cli("sessions", "list", "--json").stdout.splitlines()]
    target_id = next(row["id"] for row in listing if "source" not in row)
    mention = cli("ref", "mention", REGISTERED, "--label", "tests").stdout.strip()
    code, out, err = cli("ref", "preview", "--target", target_id, f"see {mention}", "--json")
    assert code == 0, err
    (context,) = json.loads(out)["contexts"]
    payload = json.loads(context["content"][0]["text"].split("<referenced-sessions>\n")[1].split("\n</")[0])
    assert payload[0]["conversation"] == [
        {"role": "user", "text": "list the failing tests"},
        {"role": "assistant", "text": "Three tests fail: a, b and c."},
        {"role": "user", "text": "fix them instead"},
        {"role": "assistant", "text": "Fixed all three."},
    ]


def _listed(make_host: HostFactory, config: dict | None = None) -> list[str]:
    host = make_host(objects={gemini_cli.NAME: gemini_cli}, config=config or {})
    return [row.id for row in asyncio.run(host.services.session_query.list_sessions())]


def _one_session(base: Path) -> str:
    c = GeminiChat()
    c.user("hello")
    c.write(slug_folder(base, "/work/p", "p"))
    return f"gemini-cli:{c.session_id}"


def test_where_it_looks_gemini_cli_home_names_the_home_and_dir_overrides_it(make_host, tmp_path, monkeypatch):
    for name, value in private_homes(tmp_path / "user").items():
        monkeypatch.setenv(name, value)
    assert _listed(make_host) == []  # a missing folder is an empty source
    in_user_home = _one_session(tmp_path / "user" / ".gemini")
    assert _listed(make_host) == [in_user_home]
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "other"))
    in_other_home = _one_session(tmp_path / "other" / ".gemini")
    assert _listed(make_host) == [in_other_home]
    monkeypatch.delenv("GEMINI_CLI_HOME")
    assert _listed(make_host) == [in_user_home]
    configured = _one_session(tmp_path / "configured")
    assert _listed(make_host, {"sources": {"gemini-cli": {"dir": str(tmp_path / "configured")}}}) == [configured]


def test_a_configured_folder_that_does_not_exist_is_reported(cli, tmp_path):
    config = tmp_path / "dsh.toml"
    config.write_text(f'[sources.gemini-cli]\ndir = "{tmp_path / "nowhere"}"\n', encoding="utf-8")
    cli.env["DSH_CONFIG"] = str(config)
    code, out, _ = cli("sessions", "check", "--source", "gemini-cli")
    line = f'dir = "{tmp_path / "nowhere"}" does not exist (set in [sources.gemini-cli]): no sessions are read'
    assert (code, out) == (0, f"gemini-cli  {line}\n")


def test_a_session_file_that_vanishes_is_no_longer_listed_and_not_found(cli, home):
    assert cli("sessions", "show", REGISTERED).exit_code == 0
    for path in (home / ".gemini" / "tmp" / "registered" / "chats").glob("session-*"):
        path.unlink()
    assert REGISTERED not in cli("sessions", "list").stdout
    code, _, err = cli("sessions", "show", REGISTERED)
    assert code != 0 and err.count("\n") == 1
