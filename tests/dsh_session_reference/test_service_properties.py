"""Property tests of `prepare`: the frame holds for any source text, and budgets hold or fail whole.

Sources are served by an in-memory query (surface snapshots in log form), so each example is a
real `prepare` call without a store.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_host.query import SurfaceSnapshot, SurfaceTexts, texts_of
from dsh_host.session.events import SessionHeader
from dsh_session_reference import ErrorCode, SessionReferenceError, SessionReferenceService, tag_safe_json

OPEN_TAG = "<referenced-sessions>"
CLOSE_TAG = "</referenced-sessions>"
PREFIX_END = OPEN_TAG + "\n"
SUFFIX = "\n" + CLOSE_TAG
TARGET = SessionHeader(id="the-target", created_at=0, cwd="/target")
KINDS = ("user", "checkpoint", "steering", "assistant")

# Text that stresses the frame: tags, `<`, escapes, line separators, BOMs and lone surrogates
# (which JSON carries as \udXXX escapes), mixed with arbitrary Unicode.
TRICKY = st.sampled_from(
    [
        OPEN_TAG,
        CLOSE_TAG,
        "<",
        ">",
        "&",
        '"',
        "\\",
        "\n",
        "\u2028",
        "\ufeff",
        "\ud800",
        "\udc00",
        "\x00",
        "界",
        "😀",
        "## My request:\n",
    ]
)
TEXT = st.lists(st.one_of(st.text(max_size=12), TRICKY), max_size=8).map("".join)
MESSAGE = st.tuples(st.sampled_from(KINDS), TEXT)
SOURCE = st.tuples(
    st.one_of(TEXT, st.sampled_from(["source", "other"])),  # session id
    st.one_of(st.none(), TEXT),  # label
    st.one_of(st.none(), TEXT.map(lambda s: "/" + s)),  # cwd
    st.lists(MESSAGE, max_size=6),
)
SOURCES = st.lists(SOURCE, min_size=1, max_size=3, unique_by=lambda source: source[0]).filter(
    lambda sources: all(source[0] != TARGET.id for source in sources)
)


def event(seq: int, kind: str, text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    if kind == "assistant":
        event_type = "assistant/message"
        data: dict[str, Any] = {
            "turn": 1,
            "step": 1,
            "content": content,
            "provenance": {"provider": "p", "model": "m"},
        }
    elif kind == "steering":
        event_type = "steering/message"
        data = {"content": content, "source": {"kind": "user"}, "turn": 1}
    else:
        event_type = "user/message"
        source = {"kind": "plugin", "plugin": "compact"} if kind == "checkpoint" else {"kind": "user"}
        data = {"content": content, "source": source}
    return {"type": event_type, "seq": seq, "time": seq, "data": data, "surfaceOp": "append"}


class MemoryQuery:
    def __init__(self, sources: list[tuple[str, str | None, str | None, list[tuple[str, str]]]]) -> None:
        self.snapshots = {}
        for session_id, _, cwd, messages in sources:
            events = [event(seq, kind, text) for seq, (kind, text) in enumerate(messages)]
            header = SessionHeader(id=session_id, created_at=0, cwd=cwd)
            self.snapshots[session_id] = SurfaceSnapshot(header, len(events) - 1 if events else None, events)

    async def read_surface_texts(self, session_ids: list[str]) -> list[SurfaceTexts]:

        # Every read is issued before any is awaited, as the host's one-request batch does.

        snapshots = await asyncio.gather(*(self.read_surface(i) for i in session_ids))

        return [texts_of(snapshot) for snapshot in snapshots]

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        return self.snapshots[session_id]


def as_javascript_string(text: str) -> str:
    """The same UTF-16 string with each surrogate pair written as one code point."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def expected_data(
    sources: list[tuple[str, str | None, str | None, list[tuple[str, str]]]],
) -> list[dict[str, Any]]:
    js = as_javascript_string
    return [
        {
            "sessionId": js(session_id),
            "label": js(session_id if label is None else label),
            "cwd": None if cwd is None else js(cwd),
            "capturedThroughSeq": len(messages) - 1 if messages else None,
            "conversation": [
                {"role": "assistant" if kind == "assistant" else "user", "text": js(text)}
                for kind, text in messages
                if text
            ],
        }
        for session_id, label, cwd, messages in sources
    ]


def run_prepare(sources: list[Any], **config: Any):
    service = SessionReferenceService(MemoryQuery(sources), **config)
    refs = [{"sessionId": sid} if label is None else {"sessionId": sid, "label": label} for sid, label, _, _ in sources]
    return asyncio.run(service.prepare(TARGET, [{"type": "text", "text": "q"}], refs))


def frame_body(prompt: str) -> str:
    assert prompt.startswith("## Referenced sessions\n")
    assert prompt.count(OPEN_TAG) == 1
    assert prompt.count(CLOSE_TAG) == 1
    assert prompt.endswith(SUFFIX)
    body = prompt[prompt.index(PREFIX_END) + len(PREFIX_END) : -len(SUFFIX)]
    assert "<" not in body and "\n" not in body
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SOURCES)
def test_prompt_has_one_frame_and_its_json_is_the_data(sources: list[Any]) -> None:
    prepared = run_prepare(sources, max_reference_bytes=2**53 - 1)
    [context] = prepared.contexts
    body = frame_body(context["content"][0]["text"])
    assert json.loads(body) == expected_data(sources)
    assert [ref["sessionId"] for ref in context["meta"]["references"]] == [source[0] for source in sources]
    assert all(ref["truncated"] is False for ref in context["meta"]["references"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    SOURCES.map(
        lambda sources: [(sid, label, cwd, [(k, t * 7) for k, t in msgs]) for sid, label, cwd, msgs in sources]
    ),
    st.integers(min_value=16, max_value=700),
)
def test_every_source_fits_its_budget_or_the_whole_preparation_fails(sources: list[Any], budget: int) -> None:
    try:
        prepared = run_prepare(sources, max_reference_bytes=budget)
    except SessionReferenceError as error:
        assert error.code == ErrorCode.BUDGET_EXCEEDED
        assert str(error) == "referenced session snapshot cannot fit the configured byte budget"
        return
    [context] = prepared.contexts
    body = frame_body(context["content"][0]["text"])
    data = json.loads(body)
    sizes = [len(tag_safe_json(item).encode("utf-8")) for item in data]
    assert sum(sizes) + len(sizes) + 1 == len(body.encode("utf-8"))
    assert all(size <= budget for size in sizes), (sizes, budget)
    for item, ref, expected in zip(data, context["meta"]["references"], expected_data(sources), strict=True):
        assert item["sessionId"] == expected["sessionId"] and item["label"] == expected["label"]
        assert ref["originalMessages"] == len(expected["conversation"])
        assert ref["retainedMessages"] == len(item["conversation"])
        assert ref["retainedMessages"] + ref["omittedMessages"] == ref["originalMessages"]
        assert ref["truncated"] is (ref["omittedMessages"] > 0 or ref["omittedBytes"] > 0)
        if not ref["truncated"]:
            assert item == expected
        elif expected["conversation"]:
            # The newest message is never dropped (it may be cut).
            assert item["conversation"][-1]["role"] == expected["conversation"][-1]["role"]
