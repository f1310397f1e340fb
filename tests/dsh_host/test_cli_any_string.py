"""Every command that prints a session's strings survives any JavaScript string.

Ids, titles, cwds and texts are drawn from the whole of Unicode, lone surrogates and C0/C1
controls included, imported from a log written as the reference writes it (`JSON.stringify`),
then pushed through every command that prints them. Each must exit 0; text output must be
valid UTF-8 with no raw control but LF; JSON output must parse back to the stored value; and
`sessions export` must give back the imported bytes.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_host.cli.main import build_cli
from dsh_host.host import Host
from dsh_host.terminal_text import display_inline_text
from dsh_host.testing import HostFactory
from dsh_host.testing import LogBuilder as L
from dsh_host.text import escape_lone_surrogates, join_surrogate_pairs
from dsh_session_reference import format_mention, parse_text

# Characters that broke, or could break, an output path, made likely; then anything at all.
TRICKY = '\x00\x07\x1b\n\r\t\x7f\x85\x9b\ud800\udbff\udc00\udfff\ud83d\ude00\u2028\ufeff"\\]@<😀'
ANY_CHAR = st.one_of(st.sampled_from(TRICKY), st.characters(exclude_categories=()))
TEXT = st.text(ANY_CHAR, max_size=12)
UNSAFE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def js_line(value: Any) -> str:
    """One JSONL line as JavaScript's `JSON.stringify` writes it (what the reference's logs hold)."""
    return escape_lone_surrogates(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def as_stored(text: str) -> str:
    """`text` as it comes back from a JSON log: a surrogate pair spelled as two code points is joined."""
    return join_surrogate_pairs(text)


def invoke(cli: Any, *args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output, result.stderr)
    return result


def text_lines(result: Result) -> list[str]:
    """The output as text: valid UTF-8 and free of raw controls other than LF."""
    text = result.stdout_bytes.decode("utf-8")
    assert not UNSAFE.search(text), text
    assert text.endswith("\n") or not text
    # LF alone ends a line: JSON keeps U+2028 and U+0085 raw, which `str.splitlines` splits at.
    return text.split("\n")[:-1]


def json_lines(result: Result) -> list[Any]:
    return [json.loads(line) for line in text_lines(result)]


@st.composite
def sessions(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "id": draw(TEXT.filter(lambda s: as_stored(s) != "target")),
        "cwd": "/" + draw(TEXT),
        "title": draw(TEXT),
        "prompt": draw(TEXT),
        "reply": draw(TEXT),
        "custom": draw(TEXT),
    }


def write_log(path: Path, s: dict[str, Any]) -> bytes:
    header = {"type": "session", "version": 0, "id": s["id"], "createdAt": 2000, "cwd": s["cwd"], "delegationDepth": 0}
    events = [
        L.raw("turn/start", 0, {"turn": 1, "trigger": {"kind": "message", "source": L.USER}}),
        L.user(1, s["prompt"]),
        L.raw("session/title", 2, {"title": s["title"], "messageSeqs": [1], "source": {"kind": "fallback"}}),
        L.raw("step/start", 3, {"turn": 1, "step": 1}),
        L.chunk(4, s["reply"]),
        L.assistant(5, s["reply"], sources=[4]),
        L.raw(f"custom/{s['custom']}", 6, {s["custom"]: [s["custom"]]}),
        L.raw("step/end", 7, {"turn": 1, "step": 1}),
        L.raw("turn/end", 8, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    data = "".join(js_line(value) + "\n" for value in (header, *events)).encode("utf-8")
    path.write_bytes(data)
    return data


def seed_target(home: Path) -> Path:
    """The session `ref` commands run against (a different cwd, so it never ranks itself)."""
    target = home / "target.jsonl"
    header = {"type": "session", "version": 0, "id": "target", "createdAt": 1000, "cwd": "/t", "delegationDepth": 0}
    target.write_text(js_line(header) + "\n", encoding="utf-8")
    return target


@settings(max_examples=25)
@given(s=sessions())
def test_every_output_path_survives_every_string(s: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        # Hypothesis runs many examples in one test: a factory per example, not the fixture.
        with HostFactory(home)(["session-reference"]) as host:
            check_commands(host, home, s)


def check_commands(host: Host, home: Path, s: dict[str, Any]) -> None:
    cli = build_cli(host)
    sid, cwd, title = (as_stored(s[key]) for key in ("id", "cwd", "title"))
    shown_id = display_inline_text(sid)
    log = write_log(home / "log.jsonl", s)

    # import: the confirmation names the id inertly.
    invoke(cli, "sessions", "import", str(seed_target(home)))
    assert text_lines(invoke(cli, "sessions", "import", str(home / "log.jsonl"))) == [f"imported {shown_id} (9 events)"]

    # list, text and JSON.
    listed = text_lines(invoke(cli, "sessions", "list"))
    assert any(line.startswith(f"{shown_id}  ") for line in listed), listed
    records = {r["id"]: r for r in json_lines(invoke(cli, "sessions", "list", "--json"))}
    assert (records[sid]["cwd"], records[sid]["title"]) == (cwd, title)

    # show, text and JSON (the JSON is the log's events, value for value).
    shown = text_lines(invoke(cli, "sessions", "show", "--", sid))
    assert shown[0].startswith(f"session {shown_id}  ")
    assert json_lines(invoke(cli, "sessions", "show", "--json", "--", sid)) == [
        json.loads(x) for x in log.splitlines()[1:]
    ]
    invoke(cli, "sessions", "show", "--surface", "--", sid)
    assert text_lines(invoke(cli, "sessions", "check", "--", sid)) == ["1 session: no problems"]

    # export: interchange, byte for byte what was imported (stdout and file).
    assert invoke(cli, "sessions", "export", "--", sid).stdout_bytes == log
    invoke(cli, "sessions", "export", "-o", str(home / "out.jsonl"), "--", sid)
    assert (home / "out.jsonl").read_bytes() == log

    # ref candidates, text and JSON (positional arguments follow `--`: an id may start with `-`).
    candidates = text_lines(invoke(cli, "ref", "candidates", "--target", "target"))
    assert any(line.startswith(f"{shown_id}  ") for line in candidates), candidates
    found = {c["sessionId"]: c for c in json_lines(invoke(cli, "ref", "candidates", "--json", "--target", "target"))}
    assert found[sid]["cwd"] == cwd

    # ref parse and preview of a mention of the session labelled with its title.
    message = f"{s['prompt']} {format_mention(sid, s['title'])}"
    parsed = parse_text(message)
    text_lines(invoke(cli, "ref", "parse", "--", message))
    (parsed_json,) = json_lines(invoke(cli, "ref", "parse", "--json", "--", message))
    assert parsed_json["text"] == as_stored(parsed.text)
    assert [r["sessionId"] for r in parsed_json["references"]] == [r.session_id for r in parsed.references]
    text_lines(invoke(cli, "ref", "preview", "--target", "target", "--", message))
    (preview,) = json_lines(invoke(cli, "ref", "preview", "--json", "--target", "target", "--", message))
    assert preview == expected_preview(host, message)
    text_lines(invoke(cli, "ref", "mention", "--label", s["title"], "--", sid))

    # run, text and JSON, continuing the session: the prompt comes back as it was sent.
    run = invoke(cli, "run", "--session", sid, "--", s["prompt"])
    text_lines(run)
    assert f"session: {shown_id}" in run.stderr
    events = json_lines(invoke(cli, "run", "--json", "--session", sid, "--", s["prompt"]))
    prompts = [e["data"]["content"] for e in events if e["type"] == "user/message"]
    assert prompts == [[{"type": "text", "text": as_stored(parse_text(s["prompt"]).text)}]]


def expected_preview(host: Host, message: str) -> Any:
    """What `prepare` returns for `message`, as JSON text parses it back (pairs joined)."""
    service = host.services.get("session_references")

    async def prepare() -> Any:
        target = await host.services.session_query.read_header("target")
        parsed = parse_text(message)
        return await service.prepare(target, [{"type": "text", "text": parsed.text}], parsed.references)

    return json.loads(js_line(asyncio.run(prepare()).to_json()))


def test_an_error_naming_any_string_is_one_inert_line(dsh_cli):
    assert dsh_cli("sessions", "show", "nope\ud800\x9b") == (
        1,
        "",
        'dsh: error: session "nope\\ud800\\x9b" not found\n',
    )
