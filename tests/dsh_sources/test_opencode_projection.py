"""The OpenCode projection read a message at a time equals the rule applied to the whole session at once.

`reference` is OpenCode's rule as message-v2.ts `filterCompacted` states it, over the list of
every message: walking back from the newest, the user message holding a `compaction` part that a
newer finished summary answers ends the walk, and is kept with that (newest) summary, the tail
its `tail_start_id` names, and everything newer. The projection under test sees one message at
a time and lets go of what a compaction cuts; random sessions (tails naming any message, none,
or one an earlier compaction cut) must read the same, and its memory must not follow the session.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterable, Iterator

from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.hookspecs import JsonValue
from dsh_host.sources import SourceMessage
from dsh_sources.formats.opencode_projection import MessageInfo, SessionInfo, project
from dsh_sources.transcript import Said

SESSION = SessionInfo("ses_1", None, "/work", None, 1_000, 1_000)


def shown(message: MessageInfo) -> tuple[str, ...]:
    typed = message.info.get("role") == "user"
    return tuple(
        part["text"]
        for part in message.parts
        if part.get("type") == "text"
        and isinstance(part.get("text"), str)
        and part["text"].strip()
        and not (typed and (part.get("synthetic") is True or part.get("ignored") is True))
    )


def answers(message: MessageInfo) -> object:
    info = message.info
    finished = info.get("role") == "assistant" and info.get("summary") is True and info.get("finish")
    return info.get("parentID") if finished and not info.get("error") else None


def reference(messages: list[MessageInfo]) -> tuple[list[MessageInfo], MessageInfo | None]:
    """The messages kept, in order, and the checkpoint among them."""
    for at in range(len(messages) - 1, -1, -1):
        asked = messages[at]
        compaction = [part for part in asked.parts if part.get("type") == "compaction"]
        if asked.info.get("role") != "user" or not compaction:
            continue
        summaries = [later for later in messages[at + 1 :] if answers(later) == asked.id]
        if not summaries:
            continue
        summary = summaries[-1]
        start = compaction[0].get("tail_start_id")
        older = [index for index in range(at) if messages[index].id == start]
        tail = messages[older[0] : at] if older else []
        newer = [later for later in messages[at + 1 :] if later is not summary]
        return [asked, summary, *tail, *newer], summary
    return messages, None


def expected(messages: list[MessageInfo]) -> tuple[Said, ...]:
    kept, summary = reference(messages)
    said: list[Said] = []
    for message in kept:
        texts, when = shown(message), message.created
        role = message.info.get("role")
        if not texts:
            continue
        if message is summary:
            said.append(Said(SourceMessage("user", texts, when, source=COMPACT_CHECKPOINT_SOURCE)))
        elif role == "user":
            said.append(Said(SourceMessage("user", texts, when)))
        elif role == "assistant":
            model = message.info.get("modelID")
            said.append(
                Said(SourceMessage("assistant", texts, when, model=model if isinstance(model, str) else "unknown"))
            )
    return tuple(said)


class Reads:
    """`messages()` for `project`: the session's messages `make()` makes, counting how often it is read."""

    def __init__(self, make: Callable[[], Iterable[MessageInfo]]) -> None:
        self.make = make
        self.count = 0

    def __call__(self) -> Iterator[MessageInfo]:
        self.count += 1
        yield from self.make()


@st.composite
def sessions(draw: st.DrawFn) -> list[MessageInfo]:
    """Prompts, replies, compactions and summaries: summaries answer mostly compactions, tails name any message."""
    messages: list[MessageInfo] = []
    compactions: list[str] = []
    for number in range(draw(st.integers(0, 18))):
        mid = f"msg_{number:03d}"
        ids = [message.id for message in messages]
        kind = draw(st.sampled_from(["user", "assistant", "system", "compaction", "compaction", "summary", "summary"]))
        parts: list[dict[str, object]] = []
        for _ in range(draw(st.integers(0, 2))):
            flag = draw(st.sampled_from([None, None, "synthetic", "ignored"]))
            text = draw(st.sampled_from([f"text {number}", " ", f"more {number}"]))
            parts.append({"type": "text", "text": text, **({flag: True} if flag else {})})
        info: dict[str, object] = {"role": "assistant" if kind == "summary" else kind, "modelID": "m"}
        if kind == "compaction":
            info["role"] = draw(st.sampled_from(["user"] * 5 + ["assistant"]))
            tail = draw(
                st.one_of(
                    st.none(),
                    st.just(7),
                    st.sampled_from([*ids, mid, "msg_none"]),
                    st.sampled_from(ids[:3] or ["msg_none"]),
                )
            )
            parts.insert(draw(st.integers(0, len(parts))), {"type": "compaction", "tail_start_id": tail})
            compactions.append(mid)
        if kind == "summary":
            parent = st.sampled_from(compactions) if compactions else st.just("msg_none")
            info["parentID"] = draw(st.one_of(parent, parent, parent, st.sampled_from([*ids, "msg_none"])))
            info["summary"] = draw(st.sampled_from([True] * 5 + [False]))
            info["finish"] = draw(st.sampled_from(["stop"] * 4 + ["", None]))
            info["error"] = draw(st.sampled_from([None] * 5 + [{"name": "APIError"}]))
        messages.append(MessageInfo(mid, 2_000 + number, info, parts))  # type: ignore[arg-type]
    return messages


def message(mid: str, role: str, text: str = "", tail: str | None = None, answers: str | None = None) -> MessageInfo:
    """A message with `text` (none when empty): a compaction with a `tail`, or the finished summary of `answers`."""
    parts: list[dict[str, JsonValue]] = [{"type": "text", "text": text}] if text else []
    if tail is not None:
        parts.append({"type": "compaction", "tail_start_id": tail})
    info: dict[str, JsonValue] = {"role": role}
    if answers is not None:
        info |= {"summary": True, "finish": "stop", "parentID": answers}
    return MessageInfo(mid, 2_000 + int(mid[-2:]), info, parts)


OLDER_CUT = [
    message("msg_00", "user", "first"),
    message("msg_01", "user", tail="msg_00"),
    message("msg_02", "assistant", "summary 1", answers="msg_01"),
    message("msg_03", "user", tail="msg_00"),
    message("msg_04", "assistant", "summary 2", answers="msg_03"),
    message("msg_05", "assistant", "summary 1 again", answers="msg_01"),
]
"""A summary answering a compaction older than the cut, which stays where it is."""
CUT_TAIL = [
    message("msg_00", "user", "first"),
    message("msg_01", "assistant", "reply"),
    message("msg_02", "user", tail="msg_01"),
    message("msg_03", "assistant", "summary 1", answers="msg_02"),
    message("msg_04", "user", tail="msg_00"),
    message("msg_05", "assistant", "summary 2", answers="msg_04"),
]
"""A tail naming a message the first compaction cut."""


@settings(max_examples=500, deadline=None)
@given(messages=sessions())
@example(messages=OLDER_CUT)
@example(messages=CUT_TAIL)
def test_a_session_read_a_message_at_a_time_shows_what_the_whole_session_shows(messages) -> None:
    facts, said = project(SESSION, Reads(lambda: messages))
    assert said == expected(messages)
    kept, _ = reference(messages)
    assert facts.updated_at == max([SESSION.updated, *(message.created for message in kept)])
    assert facts.messages == len(said)


def turn(number: int, *, tail: str | None = None) -> list[MessageInfo]:
    """A prompt, its reply, a compaction (tail `tail`) and its finished summary."""
    ids = [f"msg_{number:05d}{letter}" for letter in "abcd"]
    return [
        MessageInfo(ids[0], number, {"role": "user"}, [{"type": "text", "text": "x" * 10_000}]),
        MessageInfo(ids[1], number, {"role": "assistant"}, [{"type": "text", "text": "y" * 10_000}]),
        MessageInfo(ids[2], number, {"role": "user"}, [{"type": "compaction", "tail_start_id": tail or ids[1]}]),
        MessageInfo(
            ids[3],
            number,
            {"role": "assistant", "summary": True, "finish": "stop", "parentID": ids[2]},
            [{"type": "text", "text": f"summary {number}"}],
        ),
    ]


def test_a_tail_naming_a_message_an_earlier_compaction_cut_reads_the_session_again() -> None:
    first, second = turn(1), turn(2, tail="msg_00001a")
    reads = Reads(lambda: [*first, *second])
    _, said = project(SESSION, reads)
    assert reads.count == 2 and said == expected([*first, *second])
    assert [said.message.texts[0][:9] for said in said] == [
        "summary 2",
        "x" * 9,
        "y" * 9,
        "summary 1",
        "x" * 9,
        "y" * 9,
    ]


def test_sessions_as_opencode_writes_them_are_read_once_in_memory_that_does_not_follow_their_length() -> None:
    peaks = []
    for turns in (100, 400):

        def messages(turns: int = turns) -> Iterator[MessageInfo]:
            for number in range(turns):  # made as read, so only what the projection holds stays
                yield from turn(number)

        tracemalloc.start()
        reads = Reads(messages)
        project(SESSION, reads)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert reads.count == 1
    assert peaks[1] < peaks[0] * 1.2
