"""Properties of the `opencode` source over random conversations and random bad rows.

A conversation is a random run of prompts (with parts OpenCode adds or leaves out), replies
(with reasoning and tool calls), and compactions (finished, unfinished or failed, with or without
a tail). Written once as a database and once as the older JSON folder, both read the same; no
hidden text ever shows; and the messages after the last finished compaction all show, in order.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_sources.formats.opencode import OpenCodeFormat
from tests.dsh_sources.opencode_builders import DatabaseWriter, StorageWriter, read_sessions

HIDDEN = "hiddenword"
"""In every text that must never show: synthetic and ignored notes, reasoning, tool output."""

steps = st.lists(
    st.one_of(
        st.tuples(st.just("prompt"), st.booleans()),
        st.tuples(st.just("reply"), st.booleans()),
        st.tuples(st.just("compact"), st.sampled_from(["done", "unfinished", "failed", "tail"])),
    ),
    max_size=14,
)


def write(writer, script) -> tuple[str, list[str], bool]:
    """Play `script` into `writer`: the session's id, the texts that must show, whether a compaction cut."""
    sid = writer.session("/work/prop", "prop")
    last_prompt: str | None = None
    every: list[tuple[str, str]] = []  # each message with text, as written: (id, text)
    shown: list[str] = []
    cut = False
    for number, (kind, option) in enumerate(script):
        if kind == "prompt" or (kind == "reply" and last_prompt is None):
            text = f"prompt {number}"
            notes = (f"{HIDDEN} synthetic",) if option else ()
            last_prompt = writer.user(sid, text, synthetic=notes, ignored=(f"{HIDDEN} ignored",))
            every.append((last_prompt, text))
            shown.append(text)
        if kind == "reply":
            text = f"reply {number}"
            mid = writer.assistant(sid, last_prompt, (text,), reasoning=f"{HIDDEN} thought", tool_output=HIDDEN)
            every.append((mid, text))
            shown.append(text)
        elif kind == "compact":
            tail = last_prompt if option == "tail" else None
            ask = writer.compaction(sid, tail_start_id=tail)
            finish = None if option == "unfinished" else "stop"
            error = {"name": "APIError", "data": {"message": "x"}} if option == "failed" else None
            text = f"summary {number}"
            mid = writer.assistant(sid, ask, (text,), summary=True, finish=finish, error=error)
            if option in ("done", "tail"):
                ids = [held_id for held_id, _ in every]
                kept = [held for _, held in every[ids.index(tail) :]] if tail in ids else []
                shown, cut = [text, *kept], True
            else:
                shown.append(text)
            every.append((mid, text))
    return sid, shown, cut


@settings(max_examples=40, deadline=None)
@given(script=steps)
def test_a_database_and_the_older_folder_read_the_same_and_hide_what_they_must(script) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        db = DatabaseWriter(base / "opencode.db")
        sid, shown, cut = write(db, script)
        db.close()
        storage = StorageWriter(base / "storage")
        write(storage, script)
        reads = [read_sessions(base, path) for path in OpenCodeFormat(base).stores()]
        assert [read.problem for read, _ in reads] == [None, None] and [read.skipped for read, _ in reads] == [0, 0]
        assert [sessions[sid].skipped for _, sessions in reads] == [0, 0]
        conversations = [sessions[sid].messages for _, sessions in reads]
        assert conversations[0] == conversations[1]
        texts = [" ".join(said.message.texts) for said in conversations[0]]
        assert texts == shown and not any(HIDDEN in text for text in texts)
        checkpoints = [i for i, said in enumerate(conversations[0]) if said.message.source == COMPACT_CHECKPOINT_SOURCE]
        assert checkpoints == ([0] if cut else [])


@settings(max_examples=40, deadline=None)
@given(
    bad_messages=st.lists(st.binary(max_size=40).filter(lambda data: not data.strip().startswith(b"{")), max_size=4),
    bad_parts=st.lists(st.text(max_size=40).filter(lambda text: not text.strip().startswith("{")), max_size=4),
)
def test_rows_that_are_no_json_object_are_counted_never_raised(bad_messages, bad_parts) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = DatabaseWriter(Path(tmp) / "opencode.db")
        sid = db.session("/w", "t")
        prompt = db.user(sid, "kept")
        for number, data in enumerate(bad_messages):
            db.conn.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, 1, 1, ?)",
                (f"msg_bad{number}", sid, data),
            )
        for number, data in enumerate(bad_parts):
            db.conn.execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                "VALUES (?, ?, ?, 1, 1, ?)",
                (f"prt_bad{number}", prompt, sid, data),
            )
        db.close()
        read, sessions = read_sessions(Path(tmp), str(Path(tmp) / "opencode.db"))
        assert read.problem is None
        assert sessions[sid].skipped == len(bad_messages) + len(bad_parts)
        assert [said.message.texts for said in sessions[sid].messages] == [("kept",)]
