"""Gemini CLI files under random sessions, mutations and partial writes.

Mutated JSON lines never break a read and show nothing the file does not hold (and, with no
record that rewrites history, nothing that was not shown before); a file read on from where the
index stopped gives what a read from its first byte gives, for JSON lines read incrementally
and for the legacy single-JSON file read whole at every change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_sources import reading
from dsh_sources.formats.gemini_cli import GeminiCliFormat, read_session
from tests.dsh_sources.gemini_builders import GeminiChat, slug_folder
from tests.dsh_sources.test_incremental import Observer, replay, replay_drawn
from tests.dsh_sources.test_properties import WORDS, check, mutated

pytestmark = pytest.mark.foreign_logs


@st.composite
def gemini_chats(draw, *, branches: bool) -> GeminiChat:
    c = GeminiChat()
    said: list[str] = []
    if branches and draw(st.booleans()):
        c.session_context()
    for _ in range(draw(st.integers(1, 6))):
        # Rewinds, compressions and replaced histories rewrite the history: losing one brings back what it removed.
        rewrites = ["rewind", "compress", "replace", "unknown"] if branches else []
        step = draw(st.sampled_from(["turn", "tools", "tokens", "info", "summary", *rewrites]))
        if branches and said and draw(st.booleans()):
            step = draw(st.sampled_from(["again", "rewind"]))
        if step == "turn":
            said.append(c.user(draw(WORDS)))
            said.append(c.gemini(draw(WORDS), thought=draw(st.none() | WORDS)))
        elif step == "tools":
            c.tool_call(output=draw(WORDS))
        elif step == "tokens" and said and said[-1] in c.messages:
            c.tokens(said[-1])
        elif step == "again" and said:
            # A message appended again under an earlier id (any id: the rule holds for every record).
            c.again(draw(st.sampled_from(said)), draw(WORDS))
        elif step == "info":
            c.info(draw(WORDS), kind=draw(st.sampled_from(["info", "error", "warning"])))
        elif step == "summary":
            c.summary(draw(WORDS))
        elif step == "rewind" and said:
            c.rewind(draw(st.sampled_from(said)))
        elif step == "compress":
            c.compress(draw(WORDS), keep=draw(st.integers(0, 3)))
        elif step == "replace":
            c.replace_history(list(c.messages.values()))
        elif step == "unknown":
            c.raw({"$rewindTo": "no-such-id"})
    return c


def session_path(tmp: Path, suffix: str = ".jsonl") -> tuple[GeminiCliFormat, Path]:
    base = tmp / ".gemini"
    return GeminiCliFormat(base), slug_folder(
        base, "/work/p", "p"
    ) / "chats" / f"session-2026-01-01T00-00-abcd1234{suffix}"


@settings(max_examples=60)
@given(st.data())
def test_mutated_gemini_cli_files_read_without_error(tmp_path_factory, data):
    branches = data.draw(st.booleans())
    original = data.draw(gemini_chats(branches=branches)).lines()
    changed = data.draw(mutated(original, reorders=branches))
    _, path = session_path(tmp_path_factory.mktemp("g"))
    path.parent.mkdir()
    # `check` writes before.jsonl and after.jsonl in the folder it is given: a project's chats/.
    check(path.parent, read_session, original, changed, same_or_smaller=not branches)


@pytest.fixture(autouse=True)
def keys_of_every_file(monkeypatch):
    """Keep the state of small files too, so that they are read on from their offset like large ones."""
    monkeypatch.setattr(reading, "KEYED_BYTES", 0)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_gemini_cli_incremental_reads_equal_whole_reads(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("g")
    fmt, path = session_path(tmp)
    replay_drawn(tmp, data, data.draw(gemini_chats(branches=True)).lines(), fmt, path)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_gemini_cli_reads_on_after_drawn_lines_equal_whole_reads(tmp_path_factory, data):
    # Observed between whole lines, so that replacements and rewinds often reach stored messages.
    tmp = tmp_path_factory.mktemp("o")
    fmt, path = session_path(tmp)
    path.parent.mkdir()
    path.write_bytes(b"")
    observer = Observer(tmp, fmt, path)
    for line in data.draw(gemini_chats(branches=True)).lines():
        with open(path, "a") as file:
            file.write(line)
        if data.draw(st.booleans()):
            observer.observe()
    observer.observe()
    observer.close()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_legacy_file_rewritten_whole_reads_as_a_whole_read(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("l")
    fmt, path = session_path(tmp, ".json")
    replay(tmp, fmt, path, data.draw(gemini_chats(branches=True)).legacy().encode(), data.draw).close()


def test_records_that_replace_or_rewind_stored_messages_read_them_back(tmp_path):
    fmt, path = session_path(tmp_path)
    c = GeminiChat()
    c.session_context()
    first = c.user("first")
    c.gemini("first reply")
    second = c.user("second")
    c.gemini("second reply")
    c.tool_call()
    c.gemini("third reply")
    path.parent.mkdir()
    path.write_text("".join(c.lines()))
    observer = Observer(tmp_path, fmt, path)
    observer.observe()
    written = len(c.records)
    c.again(first, "first, edited")
    c.rewind(second)
    c.user("instead")
    with open(path, "a") as file:
        file.write("".join(c.lines()[written:]))
    observer.observe()
    assert observer.fresh_reads == 1
    assert [said.message.texts for said in observer.index.messages(observer.index.sessions()[0].pk)] == [
        ("first, edited",),
        ("first reply",),
        ("instead",),
    ]
    observer.close()
