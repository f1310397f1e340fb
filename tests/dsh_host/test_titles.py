"""Session titles: normalisation, fallback, eligibility, latest wins."""

from __future__ import annotations

import json

import pytest

from dsh_host.session.events import event_from_json
from dsh_host.titles import (
    FALLBACK_MAX_BYTES,
    FALLBACK_MAX_WORDS,
    eligible_title_text,
    fallback_title,
    latest_title,
    normalize_title,
)

# -- normalisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\x1b]0;stolen\x07  Hello\t brave\nnew world  ", "Hello brave new world"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ text", "link text"),
        ("\x9d0;osc to the end", ""),
        ("\x1b[31mred\x1b[0m and \x9b1;2Hplain", "red and plain"),
        ("\x1bMup\x1bD \x1b7digit", "up 7digit"),
        ("a\x00b\x08c\x0bd\x0ce\x1ff\x7fg\x85h\x9fi", "abcdefghi"),
        ("tab\tline\nreturn\r end", "tab line return end"),
        ("in\u200bvis\u200e\u200fi\u202ab\u202el\u2060e\u2064\u2066\u206f\ufeff", "invisible"),
        ("wide\u3000space\u00a0and\u2003em", "wide space and em"),
        ("   ", ""),
    ],
)
def test_normalize(text, expected):
    assert normalize_title(text, 200) == expected


def test_normalize_caps_bytes_without_splitting_a_code_point():
    assert normalize_title("abc def", 4) == "abc"
    assert normalize_title("你好世界", 7) == "你好"
    assert normalize_title("你好世界", 6) == "你好"  # the cap falls exactly on a boundary
    assert normalize_title("你好世界", 5) == "你"
    assert normalize_title("😀😀", 5) == "😀"
    assert normalize_title("😀", 3) == ""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("one two three four", 3, 80), "one two three"),
        (("你好世界", 5, 7), "你好"),
        (("  lots   of\n\nspace  here ", 2, 80), "lots of"),
        (("one two three four five six seven",), "one two three four five"),
        (
            ("Perform one side-effecting remote mutation and report",),
            "Perform one side-effecting remote mutati",
        ),
        (("😀", 5, 1), ""),
    ],
)
def test_fallback(args, expected):
    assert fallback_title(*args) == expected


def test_fallback_byte_cap_on_four_byte_characters():
    assert len(fallback_title("😀😀", 5, 5).encode("utf-8")) == 4


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None])
def test_limits_must_be_positive_integers(bad):
    with pytest.raises(ValueError, match="must be a positive integer"):
        normalize_title("x", bad)
    with pytest.raises(ValueError, match="must be a positive integer"):
        fallback_title("x", bad, 10)
    with pytest.raises(ValueError, match="must be a positive integer"):
        fallback_title("x", 3, bad)


# -- eligible messages --------------------------------------------------------------------------


def _event(L, raw):
    return event_from_json(raw)


def test_only_direct_human_text_is_eligible(log_builder):
    L = log_builder
    assert eligible_title_text(_event(L, L.user(0, "  hello "))) == "  hello "
    plugin = L.raw("user/message", 0, L.user_data("from a plugin", {"kind": "plugin", "plugin": "x"}), op="append")
    assert eligible_title_text(_event(L, plugin)) is None
    reasoning = L.raw(
        "user/message", 0, {"content": [{"type": "reasoning", "text": "why"}], "source": L.USER}, op="append"
    )
    assert eligible_title_text(_event(L, reasoning)) is None
    assert eligible_title_text(_event(L, L.user(0, " \n\t\u200b "))) is None
    context = L.raw("context/message", 0, L.user_data("ctx"), op="append")
    assert eligible_title_text(_event(L, context)) is None
    steering = L.raw("steering/message", 0, {**L.user_data("steer"), "turn": 1}, op="append")
    assert eligible_title_text(_event(L, steering)) is None
    two_blocks = L.raw("user/message", 0, {"content": [L.text("a"), L.text("b")], "source": L.USER}, op="append")
    assert eligible_title_text(_event(L, two_blocks)) == "a\nb"


def test_an_envelope_prompt_is_titled_from_its_display_content(log_builder):
    L = log_builder
    data = {
        "content": [
            L.text("<snapshot>secret context</snapshot>"),
            L.text("\n\n## My request:\n"),
            L.text("real ask"),
        ],
        "source": L.USER,
        "envelope": {"displayContent": [L.text("real ask")], "prefixContexts": []},
    }
    assert eligible_title_text(_event(L, L.raw("user/message", 0, data, op="append"))) == "real ask"


# -- latest wins --------------------------------------------------------------------------------


def test_the_latest_title_event_wins(log_builder):
    L = log_builder
    events = L.events(
        [
            L.raw(
                "session/title",
                0,
                {"title": "first", "messageSeqs": [], "source": {"kind": "fallback"}},
                time=3,
            ),
            L.raw(
                "session/title",
                1,
                {"title": "second", "messageSeqs": [7], "source": {"kind": "fallback"}},
                time=4,
            ),
            L.chunk(2),
        ]
    )
    assert latest_title(events) == {
        "title": "second",
        "messageSeqs": [7],
        "source": {"kind": "fallback"},
        "eventSeq": 1,
        "updatedAt": 4,
    }
    assert latest_title(events[:1])["title"] == "first"
    assert latest_title([]) is None


async def test_the_first_eligible_prompt_titles_the_session_once(host, log_builder):
    L = log_builder
    session = host.sessions.create("/w", "s")
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": L.USER}})
    session.append("user/message", L.user_data("  Build\nlog-backed session titles please  "), surface_op="append")
    await host.sessions.flush(session)  # the title is written with the prompt's first flush
    title = session.events[2]
    assert title.type == "session/title"
    assert dict(title.data) == {
        "title": "Build log-backed session titles please",
        "messageSeqs": [1],
        "source": {"kind": "fallback"},
    }
    assert session.surface.nodes == [1]
    assert host.store.read_title("s").title == "Build log-backed session titles please"
    session.append("user/message", L.user_data("a different prompt"), surface_op="append")
    await host.sessions.flush(session)
    assert [e.type for e in session.events].count("session/title") == 1


async def test_ineligible_prompts_give_no_title_and_a_later_one_does(host, log_builder):
    L = log_builder
    session = host.sessions.create(None, "s")
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": L.USER}})
    session.append("user/message", L.user_data("x", {"kind": "plugin", "plugin": "p"}), surface_op="append")
    session.append(
        "user/message",
        {"content": [{"type": "reasoning", "text": "r"}], "source": L.USER},
        surface_op="append",
    )
    session.append("user/message", L.user_data("   "), surface_op="append")
    await host.sessions.flush(session)
    assert latest_title(session.events) is None
    session.append("user/message", L.user_data("now a title"), surface_op="append")
    await host.sessions.flush(session)
    assert latest_title(session.events)["title"] == "now a title"
    assert latest_title(session.events)["messageSeqs"] == [4]


async def test_a_title_due_after_the_turn_closed_gets_a_turn_of_its_own(host, log_builder):
    L = log_builder
    session = host.sessions.create(None, "s")
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": L.USER}})
    session.append("user/message", L.user_data("hello there"), surface_op="append")
    session.append("turn/end", {"turn": 1, "reason": {"kind": "aborted"}})
    await host.sessions.flush(session)
    assert [e.type for e in session.events[3:]] == ["turn/start", "session/title", "turn/end"]
    assert session.events[3].data == {"turn": 2, "trigger": {"kind": "session-title"}}
    assert session.events[5].data == {"turn": 2, "reason": {"kind": "completed"}}


# -- interop with the reference -----------------------------------------------------------------


def test_fallback_titles_match_every_reference_log(reference_logs):
    assert (FALLBACK_MAX_WORDS, FALLBACK_MAX_BYTES) == (5, 40)
    checked = 0
    for path in reference_logs:
        events = [event_from_json(json.loads(line)) for line in path.read_text("utf-8").splitlines()[1:]]
        titles = [e for e in events if e.type == "session/title" and e.data["source"] == {"kind": "fallback"}]
        for title in titles:
            (message_seq,) = title.data["messageSeqs"]
            text = eligible_title_text(events[message_seq])
            assert text is not None, path.name
            assert fallback_title(text) == title.data["title"], path.name
            checked += 1
        if titles:
            first_eligible = next(e.seq for e in events if eligible_title_text(e) is not None)
            assert titles[0].data["messageSeqs"] == [first_eligible], path.name
    assert checked >= 60
