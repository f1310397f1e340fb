"""Mutated transcripts (dropped, duplicated, swapped, cut lines; retyped fields) never break a read.

For every mutation: no exception, nothing written to the agent's file, and nothing shown that the
file does not hold. On a transcript whose history nothing rewrites (no rewind or compaction in
Claude Code, no compaction or rollback in Codex: losing such a record brings back what it
replaced) and for
mutations that cannot reorder it (all but swaps), the surface is the same or smaller: every
message block shown was shown before.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_sources.claude_code import read_transcript
from dsh_sources.codex import UNREADABLE_SUMMARY, read_rollout
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout

WORDS = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(str.strip)
RETYPED = st.sampled_from([None, 0, 1, True, "", "x", [], {}, [1], {"a": 1}])
HIDING = frozenset({"isMeta", "isSidechain", "isApiErrorMessage", "teamName"})
"""Flags that hide a record: retyping one to a falsy value shows what the agent hid (a different file)."""


@st.composite
def claude_lines(draw, *, branches: bool) -> list[str]:
    t = ClaudeTranscript()
    marks: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        # Rewinds and compactions start a new chain: losing its records brings an older chain back.
        rewrites = ["compact", "rewind"] if branches else []
        step = draw(st.sampled_from(["turn", "tools", "meta", "title", *rewrites]))
        if step == "turn":
            t.user(draw(WORDS))
            marks += t.reply(("thinking", "t"), ("text", draw(WORDS)), ("text", draw(WORDS)))
        elif step == "tools":
            t.user(draw(WORDS))
            t.reply(("tool_use", "toolu_x"))
            t.tool_result("toolu_x", draw(WORDS))
            t.reply(("text", draw(WORDS)))
        elif step == "compact":
            t.compact(draw(WORDS))
        elif step == "meta":
            t.meta(draw(WORDS))
        elif step == "rewind" and marks:
            t.rewind(draw(st.sampled_from(marks)))
        else:
            t.summary(draw(WORDS))
    return t.lines()


@st.composite
def codex_lines(draw, *, branches: bool) -> list[str]:
    r = CodexRollout()
    r.meta()
    r.context()
    for _ in range(draw(st.integers(1, 6))):
        # A rollout's compactions and rollbacks rewrite its history: losing one brings back what it removed.
        rewrites = ["compact", "remote", "rollback"] if branches else []
        step = draw(st.sampled_from(["turn", "tools", "name", *rewrites]))
        if step == "turn":
            r.user(draw(WORDS))
            r.assistant(draw(WORDS), phase=draw(st.sampled_from([None, "commentary", "final_answer"])))
        elif step == "tools":
            r.tool_call(output=draw(WORDS))
        elif step == "compact":
            r.compacted(draw(WORDS), [draw(WORDS)])
        elif step == "remote":
            r.remote_compacted([draw(WORDS)])
        elif step == "rollback":
            r.rollback(draw(st.integers(0, 3)))
        else:
            r.thread_name(draw(WORDS))
    return r.lines()


def retype(line: str, draw) -> str:
    """The line with one field (at the top or one level down, not a hiding flag) given a value of another type."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    keys = sorted(set(record) - HIDING) if isinstance(record, dict) else []
    if not keys:
        return line
    key = draw(st.sampled_from(keys))
    inner = record[key]
    inner_keys = sorted(set(inner) - HIDING) if isinstance(inner, dict) else []
    if inner_keys and draw(st.booleans()):
        target, key = inner, draw(st.sampled_from(inner_keys))
    else:
        target = record
    value = draw(RETYPED)
    # A message's content retyped into a string is a message the agent wrote that way: text shown, not lost.
    target[key] = None if key == "content" and isinstance(value, str) else value
    return json.dumps(record) + "\n"


@st.composite
def mutated(draw, lines: list[str], *, reorders: bool) -> list[str]:
    lines = list(lines)
    kinds = ["drop", "duplicate", "cut", "retype"] + (["swap"] if reorders else [])
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        kind = draw(st.sampled_from(kinds))
        at = draw(st.integers(0, len(lines) - 1))
        if kind == "drop":
            del lines[at]
        elif kind == "duplicate":
            lines.insert(at, lines[at])
        elif kind == "cut":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at]) - 1))] + "\n"
        elif kind == "retype":
            lines[at] = retype(lines[at], draw)
        else:
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
    return lines


def blocks(read, path: Path) -> set[tuple[str, str]]:
    transcript = read(str(path))
    return set() if transcript is None else {(m.role, text) for m in transcript.messages for text in m.texts}


def held(lines: list[str]) -> str:
    return "".join(lines)


def check(tmp_path: Path, read, original: list[str], changed: list[str], *, same_or_smaller: bool) -> None:
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text(held(original), encoding="utf-8")
    after.write_text(held(changed), encoding="utf-8")
    data, mtime = after.read_bytes(), after.stat().st_mtime_ns
    shown = blocks(read, after)
    assert (after.read_bytes(), after.stat().st_mtime_ns) == (data, mtime)
    text = held(original)
    said = {block for _, block in shown} - {UNREADABLE_SUMMARY}  # the one text dsh says itself
    assert all(json.dumps(block)[1:-1] in text for block in said)
    if same_or_smaller:
        assert shown <= blocks(read, before)


@settings(max_examples=60)
@given(st.data())
def test_mutated_claude_code_transcripts_read_without_error(tmp_path_factory, data):
    branches = data.draw(st.booleans())
    original = data.draw(claude_lines(branches=branches))
    changed = data.draw(mutated(original, reorders=branches))
    check(tmp_path_factory.mktemp("c"), read_transcript, original, changed, same_or_smaller=not branches)


@settings(max_examples=60)
@given(st.data())
def test_mutated_codex_rollouts_read_without_error(tmp_path_factory, data):
    branches = data.draw(st.booleans())
    original = data.draw(codex_lines(branches=branches))
    changed = data.draw(mutated(original, reorders=branches))
    check(tmp_path_factory.mktemp("x"), read_rollout, original, changed, same_or_smaller=not branches)
