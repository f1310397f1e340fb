"""Transcript rendering: display content, reference cards and inert control text.

The transcript is built as a host builds it: the host's renderers from `dsh_host.builtins`, the
compact and session-reference plugins' through the same hooks.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

import dsh_compact.plugin
import dsh_session_reference.plugin
from dsh_host import builtins, hookimpl
from dsh_host.plugins import new_plugin_manager
from dsh_host.tui import render
from dsh_host.tui.render import Transcript, join_display_text
from dsh_session_reference.terminal import reference_card

PROBE = "\x1b]2;title\x07\t\x7f\x9b31m"
ESCAPED = r"\x1b]2;title\x07\x09\x7f\x9b31m"
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
REFERENCE_SOURCE = {"kind": "plugin", "plugin": "session-reference"}
DELIMITER = "\n\n## My request:\n"


def transcript(*plugins) -> Transcript:
    pm = new_plugin_manager()
    for plugin in (builtins, dsh_compact.plugin, dsh_session_reference.plugin, *plugins):
        pm.register(plugin)
    return Transcript(pm.hook)


TRANSCRIPT = transcript()


def render_event(event):
    return TRANSCRIPT.render(event)


def render_events(console, events):
    TRANSCRIPT.print(console, events)


def printed(*renderables) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None, highlight=False)
    for renderable in renderables:
        console.print(renderable)
    return console.file.getvalue()


def shown(*events) -> str:
    return printed(*(r for event in events for r in render_event(event)))


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def card_meta(*references) -> dict:
    return {"kind": "session-reference", "version": 1, "references": list(references)}


def user(content, *, envelope=None, source=None, kind="user/message") -> dict:
    data = {"content": content, "source": source or {"kind": "user"}}
    if envelope is not None:
        data["envelope"] = envelope
    if kind == "steering/message":
        data["turn"] = 1
    return {"type": kind, "data": data}


def context(content, meta=None, source=None) -> dict:
    data = {"content": content, "source": source or {"kind": "plugin", "plugin": "workspace"}}
    if meta is not None:
        data["meta"] = meta
    return {"type": "context/message", "data": data}


# --- join and cards -----------------------------------------------------------------------------------


def test_join_concatenates_every_block_kind_without_separators():
    blocks = [
        text("a"),
        {"type": "reasoning", "text": "b"},
        {"type": "tool-call", "id": "1", "name": "read", "arguments": '{"p":1}'},
        {"type": "tool-result", "toolCallId": "1", "content": [text("c"), {"type": "image"}]},
        {"type": "image", "data": "..."},
    ]
    assert join_display_text(blocks) == 'abread({"p":1})c[image][image]'
    assert join_display_text([text(""), text("")]) == ""
    assert join_display_text("not a list") == ""


def test_a_card_lists_label_and_id_or_just_the_id():
    meta = card_meta({"sessionId": "prefixed", "label": "Prefixed source"}, {"sessionId": "same", "label": "same"})
    assert reference_card(meta) == "Referenced sessions · Prefixed source (prefixed), same"


def test_an_empty_reference_list_leaves_a_dangling_card():
    assert reference_card(card_meta()) == "Referenced sessions · "


@pytest.mark.parametrize(
    "meta",
    [
        None,
        "session-reference",
        {"kind": "other", "references": []},
        {"kind": "session-reference"},
        {"kind": "session-reference", "references": "x"},
        card_meta(None),
        card_meta({}),
        card_meta({"sessionId": "a", "label": "A"}, {"sessionId": "b"}),
        card_meta({"sessionId": 1, "label": "A"}),
    ],
)
def test_invalid_metas_make_no_card(meta):
    assert reference_card(meta) is None


def test_card_entries_escape_controls_but_keep_line_feeds():
    meta = card_meta({"sessionId": f"id{PROBE}", "label": "two\nlines"})
    assert reference_card(meta) == f"Referenced sessions · two\nlines (id{ESCAPED})"


# --- what the transcript shows ----------------------------------------------------------------------------


def test_a_user_message_shows_its_display_content_and_card_not_the_baked_snapshot():
    envelope = {
        "displayContent": [text("visible referenced question")],
        "prefixContexts": [
            {
                "source": REFERENCE_SOURCE,
                "meta": card_meta({"sessionId": "prefixed", "label": "Prefixed source"}),
            }
        ],
    }
    out = shown(
        user(
            [text("hidden baked snapshot payload"), text(DELIMITER), text("visible referenced question")],
            envelope=envelope,
        )
    )
    assert "You" in out
    assert "visible referenced question" in out
    assert "Referenced sessions · Prefixed source (prefixed)" in out
    assert "hidden baked snapshot payload" not in out
    assert "My request" not in out


def test_a_steering_message_shows_only_session_reference_cards():
    envelope = {
        "displayContent": [text("visible steering prompt")],
        "prefixContexts": [
            {"source": {"kind": "plugin", "plugin": "other"}, "meta": {"kind": "other"}},
            {
                "source": REFERENCE_SOURCE,
                "meta": card_meta({"sessionId": "steering-source", "label": "Steering source"}),
            },
        ],
    }
    out = shown(
        user(
            [
                text("hidden other prefix"),
                text("hidden baked prefix"),
                text(DELIMITER),
                text("visible steering prompt"),
            ],
            envelope=envelope,
            kind="steering/message",
        )
    )
    assert "Steering" in out and "visible steering prompt" in out
    assert out.count("Referenced sessions") == 1
    assert "Referenced sessions · Steering source (steering-source)" in out
    assert "hidden" not in out


def test_a_context_message_with_a_card_hides_its_payload():
    out = shown(
        context(
            [text("hidden context payload")],
            card_meta({"sessionId": "source", "label": "Source"}),
            REFERENCE_SOURCE,
        )
    )
    assert "Referenced sessions · Source (source)" in out
    assert "hidden context payload" not in out
    assert "Context ·" not in out


@pytest.mark.parametrize(
    "meta",
    [{"kind": "other"}, card_meta(None), card_meta({})],
    ids=["other-kind", "null-entry", "empty-entry"],
)
def test_a_context_message_with_an_invalid_meta_renders_as_ordinary_context(meta):
    out = shown(context([text("ordinary context text")], meta))
    assert "Context · workspace" in out
    assert "ordinary context text" in out
    assert "Referenced sessions" not in out


def test_a_context_card_whose_label_is_its_id_shows_the_id_once():
    out = shown(context([text("x")], card_meta({"sessionId": "same", "label": "same"})))
    assert "Referenced sessions · same\n" in out


def test_a_message_without_envelope_shows_its_content():
    out = shown(user([text("  plain question  ")]))
    assert "plain question" in out


def test_an_empty_message_prints_no_box_but_keeps_its_card():
    envelope = {
        "displayContent": [text(" ")],
        "prefixContexts": [{"source": REFERENCE_SOURCE, "meta": card_meta()}],
    }
    out = shown(user([text("baked")], envelope=envelope))
    assert "You" not in out
    assert "Referenced sessions · " in out


def test_plugin_authored_messages_name_their_plugin():
    out = shown(user([text("summary")], source={"kind": "plugin", "plugin": "compact"}))
    assert "Message · compact" in out


def test_assistant_messages_show_reasoning_and_text_but_not_tool_call_blocks():
    event = {
        "type": "assistant/message",
        "data": {
            "content": [
                {"type": "reasoning", "text": "thinking it over"},
                text("the answer"),
                {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
            ]
        },
    }
    out = shown(event)
    assert "Assistant" in out and "thinking it over" in out and "the answer" in out
    assert "read" not in out
    assert shown({"type": "assistant/message", "data": {"content": []}}) == ""


def test_tool_cards_are_compact():
    call = {"type": "tool/call", "data": {"callId": "c1", "name": "read", "arguments": '{"path": "a.txt"}'}}
    result = {
        "type": "tool/result",
        "data": {"callId": "c1", "content": [text("one\ntwo\nthree")], "isError": False},
    }
    failed = {"type": "tool/result", "data": {"callId": "c2", "content": [], "isError": True}}
    out = shown(call, result, failed)
    assert 'read({"path": "a.txt"})' in out
    assert "ok · one  (+2 lines)" in out
    assert "error · (no output)" in out


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ({"kind": "error", "step": 1, "message": "prompt hook broke"}, "Turn failed: prompt hook broke"),
        (
            {"kind": "error", "step": 1, "failure": {"message": "rate limited", "code": "RATE_LIMIT"}},
            "rate limited",
        ),
        ({"kind": "aborted"}, "Turn cancelled."),
        ({"kind": "max-tokens"}, "output token limit"),
    ],
)
def test_turn_endings_worth_telling_are_told(reason, expected):
    assert expected in shown({"type": "turn/end", "data": {"turn": 1, "reason": reason}})


def test_quiet_events_print_nothing():
    quiet = [
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "assistant/chunk", "data": {"chunk": {"type": "text-delta", "text": "x"}}},
        {"type": "some/unknown-type", "data": {"text": "x"}},
        {"type": "user/message", "data": None},
    ]
    assert shown(*quiet) == ""


def test_compaction_outcomes():
    assert "Conversation compacted." in shown({"type": "compact/end", "data": {"turn": 1}})
    assert "Compaction failed: no room" in shown({"type": "compact/end", "data": {"turn": 1, "error": "no room"}})


def test_rich_markup_in_messages_is_literal():
    out = shown(user([text("[bold red]not markup[/] and [link=x]y[/link]")]))
    assert "[bold red]not markup[/] and [link=x]y[/link]" in out


# --- escaping everywhere (T-U) ------------------------------------------------------------------------------


def test_terminal_controls_render_as_inert_text_everywhere():
    events = [
        user([text(f"user {PROBE}")]),
        user([text(f"steer {PROBE}")], kind="steering/message"),
        {
            "type": "assistant/message",
            "data": {"content": [{"type": "reasoning", "text": f"why {PROBE}"}, text(f"say {PROBE}")]},
        },
        {"type": "tool/call", "data": {"name": f"tool{PROBE}", "arguments": f'{{"x": "{PROBE}"}}'}},
        {"type": "tool/result", "data": {"content": [text(f"output {PROBE}")], "isError": True}},
        context([text(f"context {PROBE}")], source={"kind": "plugin", "plugin": f"unsafe-{PROBE}"}),
        context([text("x")], card_meta({"sessionId": f"id{PROBE}", "label": f"label{PROBE}"})),
        {"type": "prompt/blocked", "data": {"content": [], "reason": f"blocked {PROBE}"}},
        {
            "type": "turn/end",
            "data": {"turn": 1, "reason": {"kind": "error", "step": 1, "message": f"fail {PROBE}"}},
        },
        {"type": "compact/end", "data": {"turn": 1, "error": f"compact {PROBE}"}},
    ]
    console = Console(file=io.StringIO(), width=300, color_system=None, highlight=False)
    render_events(console, events)
    console.print(render.notice(f"notice {PROBE}"), render.error(f"error {PROBE}"))
    console.print(render.banner(f"model{PROBE}", f"session{PROBE}", [f"feature{PROBE}"], f"/cwd{PROBE}"))
    console.print(render.session_listing([(f"id{PROBE}", "1970-01-01T00:00:00.000Z", f"/c{PROBE}", f"t{PROBE}")], "x"))
    out = console.file.getvalue()
    assert not RAW_CONTROL.search(out)
    for where in (
        "user", "steer", "why", "say", "tool", "output", "context", "unsafe-", "blocked", "fail", "compact",
        "notice", "error", "model", "session", "feature", "/cwd", "/c", "label",
    ):  # fmt: skip
        assert f"{where}{ESCAPED}" in out or f"{where} {ESCAPED}" in out, where


def test_render_events_accepts_logged_event_objects(host):
    session = host.sessions.create("/workspace")
    session.append("user/message", {"content": [text("from the log")], "source": {"kind": "user"}}, surface_op="append")
    console = Console(file=io.StringIO(), width=100, color_system=None)
    render_events(console, session.events)
    assert "from the log" in console.file.getvalue()


# --- plugins register renderers -------------------------------------------------------------------------


class Custom:
    """A throwaway plugin rendering its own event type and its own context kind."""

    @hookimpl
    def dsh_register_renderers(self, register):
        register("custom/ping", lambda data, transcript: [render.notice(f"ping {data.get('n')}")])

    @hookimpl
    def dsh_register_context_renderers(self, register):
        register("custom", lambda meta: render.card(f"custom card {meta.get('n')}") if "n" in meta else None)


def test_plugins_render_their_events_and_contexts():
    custom = transcript(Custom())
    out = printed(*custom.render({"type": "custom/ping", "data": {"n": 7}}))
    assert "ping 7" in out
    assert printed(*render_event({"type": "custom/ping", "data": {"n": 7}})) == ""  # without the plugin
    envelope = {"displayContent": [text("question")], "prefixContexts": [{"meta": {"kind": "custom", "n": 1}}]}
    out = printed(*custom.render(user([text("baked")], envelope=envelope)))
    assert "question" in out and "custom card 1" in out and "baked" not in out
    assert "custom card 2" in printed(*custom.render(context([text("hidden")], {"kind": "custom", "n": 2})))
    # An invalid meta of the kind falls back to the generic context block.
    assert "Context · workspace" in printed(*custom.render(context([text("shown")], {"kind": "custom"})))


def test_a_type_or_kind_registered_twice_is_an_error():
    with pytest.raises(ValueError, match="'user/message' events is already registered"):

        class Twice:
            @hookimpl
            def dsh_register_renderers(self, register):
                register("user/message", lambda data, transcript: [])

        transcript(Twice())
    with pytest.raises(ValueError, match="'session-reference' contexts is already registered"):

        class TwiceContext:
            @hookimpl
            def dsh_register_context_renderers(self, register):
                register("session-reference", lambda meta: None)

        transcript(TwiceContext())
