"""The surface as text: kept per surface node by the store, derived from events when live."""

from __future__ import annotations

import pytest

from dsh_host.query import texts_of
from dsh_host.session.events import SurfaceText, surface_text
from dsh_host.session.jsonl import read_log_file
from dsh_host.store.base import SessionNotFound

# Its logs are built by hand (turnless fixtures, reference logs, broken logs on purpose), not written by dsh.
pytestmark = pytest.mark.foreign_logs


def test_surface_text_of_prompts_uses_the_display_content():
    baked = {
        "content": [{"type": "text", "text": "<snapshot>"}, {"type": "text", "text": "\n\n## My request:\n"}],
        "source": {"kind": "user"},
        "envelope": {"displayContent": [{"type": "text", "text": "direct"}, {"type": "reasoning", "text": "r"}]},
    }
    assert surface_text("user/message", baked) == SurfaceText("user/message", "user", None, "direct")
    plugin = {
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "source": {"kind": "plugin", "plugin": "compact"},
    }
    assert surface_text("user/message", plugin) == SurfaceText("user/message", "plugin", "compact", "a\nb")
    assert surface_text("assistant/message", {"content": [{"type": "tool-call"}]}).text == ""
    assert surface_text("user/message", 5) == SurfaceText("user/message", None, None, "")
    assert surface_text("user/message", {"source": {"kind": 1}, "content": []}).source_kind is None


async def test_store_and_live_texts_agree_for_every_reference_log(host, reference_logs):
    query = host.services.session_query
    for path in reference_logs:
        parsed = read_log_file(path)
        host.store.import_log(parsed.header, parsed.events)
        (stored,) = await query.read_surface_texts([parsed.header.id])
        assert stored.texts == texts_of(await query.read_surface(parsed.header.id)).texts, path.name
        live = host.sessions.create(parsed.header.cwd, f"live-{parsed.header.id}")
        for event in parsed.events:
            live.append_raw(event.to_json())
        (from_memory,) = await query.read_surface_texts([live.id])
        assert from_memory.texts == stored.texts, path.name
        assert from_memory.captured_through_seq == stored.captured_through_seq


async def test_unknown_session_is_not_found(host):
    with pytest.raises(SessionNotFound, match='session "nope" not found'):
        await host.services.session_query.read_surface_texts(["nope"])


async def test_texts_of_a_session_with_lone_surrogates_round_trip(host):
    session = host.sessions.create("/w", "surrogates")
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "a\ud800b"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    await host.sessions.flush(session)
    host.sessions.forget("surrogates")
    (stored,) = await host.services.session_query.read_surface_texts(["surrogates"])
    assert stored.texts == [SurfaceText("user/message", "user", None, "a\ud800b")]


async def test_several_sessions_are_read_in_one_request_in_order(host):
    for sid in ("a", "b"):
        session = host.sessions.create("/w", sid)
        session.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        session.append(
            "user/message",
            {"content": [{"type": "text", "text": sid}], "source": {"kind": "user"}},
            surface_op="append",
        )
        await host.sessions.flush(session)
    host.sessions.forget("a")  # "a" from the store, "b" from memory
    texts = await host.services.session_query.read_surface_texts(["b", "a"])
    assert [t.header.id for t in texts] == ["b", "a"]
    assert [t.texts[0].text for t in texts] == ["b", "a"]
