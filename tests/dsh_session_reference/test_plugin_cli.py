"""The session-reference plugin's configuration, and the `dsh ref` commands through `dsh`'s entry point."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dsh_host import Session, SessionHeader
from dsh_host.testing import DshRunner
from dsh_session_reference import SessionReferenceService, format_mention, parse_text
from tests.dsh_session_reference.conftest import MakeHost

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs

SOURCE_URI = "dsh-session:InNvdXJjZSI"
USER = {"kind": "user"}


@pytest.fixture
def ref(dsh_cli: DshRunner) -> DshRunner:
    """`dsh` with session-reference mounted and its data where `make_host`'s hosts keep theirs."""
    dsh_cli.plugins = ["session-reference"]
    dsh_cli.home = dsh_cli.root / "data"
    return dsh_cli


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dsh: error: ")
    return lines[0]


def seed(make_host: MakeHost) -> None:
    """target (/work), source (/work, titled, two messages), other (/elsewhere)."""
    host = make_host()
    try:
        for session_id, cwd, created_at in (
            ("target", "/work", 1),
            ("source", "/work", 2),
            ("other", "/elsewhere", 3),
        ):
            session = Session(SessionHeader(id=session_id, created_at=created_at, cwd=cwd))
            if session_id == "source":
                session.append(
                    "user/message",
                    {"content": [{"type": "text", "text": "what is <x>?"}], "source": USER},
                    surface_op="append",
                )
                session.append(
                    "assistant/message",
                    {
                        "turn": 1,
                        "step": 1,
                        "content": [{"type": "text", "text": "x is y"}],
                        "provenance": {"provider": "p", "model": "m"},
                    },
                    surface_op="append",
                )
                session.append(
                    "session/title",
                    {"title": "Source chat", "messageSeqs": [0], "source": {"kind": "fallback"}},
                )
            if session.seq:
                host.store.append(session.header, list(session.events))
            else:
                host.store.import_log(session.header, [])
    finally:
        host.close()


def prepare_directly(make_host: MakeHost, target_id: str, text: str) -> dict[str, Any]:
    host = make_host()
    try:
        service: SessionReferenceService = host.services.session_references

        async def go() -> dict[str, Any]:
            target = await host.services.session_query.read_header(target_id)
            parsed = parse_text(text)
            prepared = await service.prepare(target, [{"type": "text", "text": parsed.text}], parsed.references)
            return prepared.to_json()

        return asyncio.run(go())
    finally:
        host.close()


# --- [plugins.session-reference] -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "key", "shown"),
    [
        ("max_references = 4", "max_references", "4"),
        ("max_references = 0", "max_references", "0"),
        ("max_references = true", "max_references", "true"),
        ("max_references = 1.5", "max_references", "1.5"),
        ("candidate_limit = 0", "candidate_limit", "0"),
        ('candidate_limit = "7"', "candidate_limit", '"7"'),
        ("max_reference_bytes = 1.5", "max_reference_bytes", "1.5"),
        ("max_reference_bytes = -3", "max_reference_bytes", "-3"),
        ("max_reference_bytes = 9007199254740992", "max_reference_bytes", "9007199254740992"),
        ("unknown_key = 1", "unknown_key", "unknown key"),
    ],
)
def test_invalid_plugin_table_names_table_key_and_value(ref: DshRunner, line: str, key: str, shown: str) -> None:
    config = ref.root / "bad.toml"
    config.write_text(f"[plugins.session-reference]\n{line}\n")
    code, out, err = ref("--config", str(config), "plugins")
    assert code == 2
    assert out == ""
    message = one_error_line(err)
    assert "plugins.session-reference" in message
    assert key in message
    assert message.endswith(f"got {shown}") or shown in message


def test_valid_plugin_table_reaches_the_service(ref: DshRunner, make_host: MakeHost) -> None:
    host = make_host(max_references=2, candidate_limit=7, max_reference_bytes=1234)
    try:
        service = host.services.session_references
        assert isinstance(service, SessionReferenceService)
        assert (service.max_references, service.candidate_limit, service.max_reference_bytes) == (2, 7, 1234)
        assert host.services.owner_of("session_references") == "session-reference"
    finally:
        host.close()
    defaults = make_host()
    try:
        service = defaults.services.session_references
        assert (service.max_references, service.candidate_limit, service.max_reference_bytes) == (
            3,
            50,
            65536,
        )
    finally:
        defaults.close()

    config = ref.root / "good.toml"
    config.write_text("[plugins.session-reference]\nmax_references = 3\ncandidate_limit = 1\n")
    code, out, err = ref("--config", str(config), "plugins", "--json")
    assert (code, err) == (0, "")
    assert "session-reference" in json.loads(out)["mounted"]


def test_unmounting_removes_the_service(make_host: MakeHost) -> None:
    host = make_host()
    host.close()
    assert host.services.get("session_references") is None


# --- dsh ref uri / mention / parse ---------------------------------------------------------------


def test_ref_uri(ref: DshRunner) -> None:
    assert ref("ref", "uri", "source") == (0, SOURCE_URI + "\n", "")
    assert ref("ref", "uri", "") == (0, "dsh-session:IiI\n", "")
    weird = 'unicode/引号"/slash\\/line\n'
    assert ref("ref", "uri", weird) == (
        0,
        "dsh-session:InVuaWNvZGUv5byV5Y-3XCIvc2xhc2hcXC9saW5lXG4i\n",
        "",
    )


def test_ref_mention_labels_a_session_as_the_menu_does(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    # Its title when it has one, else its id; --label overrides (and reads no session).
    assert ref("ref", "mention", "source") == (0, "@[Source chat](dsh-session:InNvdXJjZSI)\n", "")
    assert ref("ref", "mention", "target") == (0, "@[target](dsh-session:InRhcmdldCI)\n", "")
    assert ref("ref", "mention", "source-session", "--label", "Source session") == (
        0,
        "@[Source session](dsh-session:InNvdXJjZS1zZXNzaW9uIg)\n",
        "",
    )
    assert ref("ref", "mention", "a]b\\c", "--label", "a]b\\c") == (
        0,
        "@[a\\]b\\\\c](dsh-session:ImFdYlxcYyI)\n",
        "",
    )
    code, out, err = ref("ref", "mention", "nope")
    assert (code, out, one_error_line(err)) == (1, "", 'dsh: error: session "nope" not found')


def test_ref_parse_json(ref: DshRunner) -> None:
    text = f"compare {format_mention('source', '源]会话')} and {SOURCE_URI}."
    code, out, err = ref("ref", "parse", text, "--json")
    assert (code, err) == (0, "")
    assert out.endswith("\n") and out.count("\n") == 1
    assert json.loads(out) == {
        "text": "compare @源]会话 and @source.",
        "references": [
            {"sessionId": "source", "label": "源]会话"},
            {"sessionId": "source", "label": "source"},
        ],
    }


def test_ref_parse_text(ref: DshRunner) -> None:
    code, out, err = ref("ref", "parse", "see @[Src](dsh-session:InNvdXJjZSI) now")
    assert (code, err) == (0, "")
    assert out == 'see @Src now\n- "source" as "Src"\n'
    assert ref("ref", "parse", "what is a dsh-session: URI?") == (
        0,
        "what is a dsh-session: URI?\n",
        "",
    )


@pytest.mark.parametrize("text", ["see dsh-session:IiJ", "@[bad](dsh-session:%%%)", "dsh-session:abc"])
def test_ref_parse_invalid_mention_fails_with_the_code(ref: DshRunner, text: str) -> None:
    code, out, err = ref("ref", "parse", text, "--json")
    assert code == 1
    assert out == ""
    message = one_error_line(err)
    assert message.startswith("dsh: error: invalid session reference URI ")
    assert message.endswith("(SESSION_REFERENCE_INVALID_REFERENCE)")


def test_ref_parse_error_shows_the_cause(ref: DshRunner) -> None:
    code, _, err = ref("ref", "parse", "use dsh-session:IiJ")
    assert code == 1
    assert err == (
        'dsh: error: invalid session reference URI "dsh-session:IiJ": URI is not canonical '
        "(SESSION_REFERENCE_INVALID_REFERENCE)\n"
    )


# --- dsh ref candidates / preview -----------------------------------------------------------------


def test_ref_candidates_json(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    code, out, err = ref("ref", "candidates", "--target", "target", "--json")
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"sessionId": "source", "label": "Source chat", "cwd": "/work", "createdAt": 2},
        {"sessionId": "other", "label": "other", "cwd": "/elsewhere", "createdAt": 3},
    ]
    code, out, _ = ref("ref", "candidates", "--target", "target", "chat", "--limit", "5", "--json")
    assert code == 0
    assert [json.loads(line)["sessionId"] for line in out.splitlines()] == ["source"]
    code, out, _ = ref("ref", "candidates", "--target", "target", "--limit", "1", "--json")
    assert [json.loads(line)["sessionId"] for line in out.splitlines()] == ["source"]
    code, out, _ = ref("ref", "candidates", "--target", "target", "ELSEWHERE", "--json")
    assert [json.loads(line)["sessionId"] for line in out.splitlines()] == ["other"]


def test_ref_candidates_text(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    code, out, err = ref("ref", "candidates", "--target", "target")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].split() == ["source", "/work", "Source", "chat"]
    assert lines[1].split() == ["other", "/elsewhere", "other"]


def test_ref_candidates_errors(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    code, out, err = ref("ref", "candidates", "--target", "target", "--limit", "0")
    assert (code, out) == (1, "")
    assert one_error_line(err) == (
        "dsh: error: candidate limit must be a positive safe integer (SESSION_REFERENCE_INVALID_REFERENCE)"
    )
    code, out, err = ref("ref", "candidates", "--target", "nobody")
    assert (code, out) == (1, "")
    assert 'session "nobody" not found' in one_error_line(err)


def test_ref_preview_json_is_exactly_what_prepare_returns(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    text = f"compare {format_mention('source', 'Source chat')} with {format_mention('other')}"
    code, out, err = ref("ref", "preview", "--target", "target", text, "--json")
    assert (code, err) == (0, "")
    expected = prepare_directly(make_host, "target", text)
    assert out == json.dumps(expected, ensure_ascii=False) + "\n"
    shown = json.loads(out)
    assert shown["content"] == [{"type": "text", "text": "compare @Source chat with @other"}]
    [context] = shown["contexts"]
    assert context["placement"] == "prompt-prefix"
    assert [r["label"] for r in context["meta"]["references"]] == ["Source chat", "other"]
    assert "what is \\u003cx>?" in context["content"][0]["text"]


def test_ref_preview_without_mentions_has_no_context(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    code, out, err = ref("ref", "preview", "--target", "target", "just text", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"content": [{"type": "text", "text": "just text"}], "contexts": []}


def test_ref_preview_text(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    text = f"use {format_mention('source')}"
    code, out, err = ref("ref", "preview", "--target", "target", text)
    assert (code, err) == (0, "")
    prompt = prepare_directly(make_host, "target", text)["contexts"][0]["content"][0]["text"]
    assert out == (f"content: use @source\ncontext (prompt-prefix, source session-reference):\n{prompt}\n")


@pytest.mark.parametrize(
    ("text", "code_name", "needle"),
    [
        ("use dsh-session:IiJ", "SESSION_REFERENCE_INVALID_REFERENCE", "invalid session reference URI"),
        (f"use {format_mention('missing')}", "SESSION_REFERENCE_READ_FAILED", 'session "missing" not found'),
        (
            f"use {format_mention('target')}",
            "SESSION_REFERENCE_SELF_REFERENCE",
            'session "target" cannot reference itself',
        ),
        (
            " ".join(format_mention(s) for s in ("source", "other", "x", "y")),
            "SESSION_REFERENCE_TOO_MANY",
            "a message may reference at most 3 sessions",
        ),
    ],
)
def test_ref_preview_failures_print_one_error_with_the_code(
    ref: DshRunner, make_host: MakeHost, text: str, code_name: str, needle: str
) -> None:
    seed(make_host)
    code, out, err = ref("ref", "preview", "--target", "target", text, "--json")
    assert (code, out) == (1, "")
    message = one_error_line(err)
    assert needle in message
    assert message.endswith(f"({code_name})")


def test_ref_preview_budget_failure(ref: DshRunner, make_host: MakeHost) -> None:
    seed(make_host)
    config = ref.root / "tiny.toml"
    config.write_text("[plugins.session-reference]\nmax_reference_bytes = 16\n")
    code, out, err = ref(
        "--config",
        str(config),
        "ref",
        "preview",
        "--target",
        "target",
        f"use {format_mention('source')}",
    )
    assert (code, out) == (1, "")
    assert one_error_line(err) == (
        "dsh: error: referenced session snapshot cannot fit the configured byte budget "
        "(SESSION_REFERENCE_BUDGET_EXCEEDED)"
    )


def test_ref_is_absent_without_the_plugin(ref: DshRunner) -> None:
    ref.plugins = []
    code, out, err = ref("ref", "uri", "source")
    assert code == 2
    assert out == ""
    assert one_error_line(err).startswith("dsh: error: ")
    assert "ref" in err


def test_ref_preview_text_shows_source_controls_inert(ref: DshRunner, make_host: MakeHost) -> None:
    host = make_host()
    try:
        for session_id in ("target", "loud"):
            session = Session(SessionHeader(id=session_id, created_at=0, cwd="/work"))
            if session_id == "loud":
                probe = "\x1b]2;owned\x07 \x9b31m red \x7f"
                session.append(
                    "user/message",
                    {"content": [{"type": "text", "text": probe}], "source": USER},
                    surface_op="append",
                )
                host.store.append(session.header, list(session.events))
            else:
                host.store.import_log(session.header, [])
    finally:
        host.close()
    text = f"use {format_mention('loud')}"

    code, out, err = ref("ref", "preview", "--target", "target", text)
    assert (code, err) == (0, "")
    assert not any(ch in out for ch in "\x1b\x07\x9b\x7f")
    assert "\\u001b]2;owned\\u0007 \\x9b31m red \\x7f" in out

    code, out, err = ref("ref", "preview", "--target", "target", text, "--json")
    assert (code, err) == (0, "")
    # Exactly what prepare returns, as a JSON value; DEL and C1 written as \u00XX escapes.
    assert json.loads(out) == prepare_directly(make_host, "target", text)
    assert not any(ch in out for ch in "\x9b\x7f")
