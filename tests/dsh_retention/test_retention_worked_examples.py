"""Head, tail and head-and-tail retention on a table of small cases: whole UTF-8 characters within
byte budgets, what each push keeps, and what is omitted."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dsh_retention import Omitted, PushDecision, TextRetainer, retain_head_tail

T, F = True, False


@dataclass(frozen=True)
class Row:
    head: int
    tail: int
    make: str  # which constructor the row uses: head, tail or head_tail
    pushes: tuple[str | bytes, ...]
    text: str
    omitted: Omitted
    decisions: tuple[tuple[bool, bool], ...] | None = None

    def retainer(self) -> TextRetainer:
        if self.make == "head":
            return TextRetainer.head(self.head)
        if self.make == "tail":
            return TextRetainer.tail(self.tail)
        return TextRetainer.head_tail(self.head, self.tail)


ROWS = {
    "head 5 abc,de,fgh": Row(5, 0, "head", ("abc", "de", "fgh"), "abcde", Omitted.exact(3), ((T, F), (T, F), (F, T))),
    "head 4 ab,cde": Row(4, 0, "head", ("ab", "cde"), "abcd", Omitted.exact(1), ((T, F), (F, T))),
    "head 2 a€b": Row(2, 0, "head", ("a€b",), "a", Omitted.exact(4)),
    "tail 2 a€b": Row(0, 2, "tail", ("a€b",), "b", Omitted.exact(4)),
    "headTail 2/2 a€€b": Row(2, 2, "head_tail", ("a€€b",), "ab", Omitted.exact(6)),
    "headTail 1/3 éab": Row(1, 3, "head_tail", ("éab",), "éab", Omitted.none()),
    "headTail 2/2 €€€": Row(2, 2, "head_tail", ("€€€",), "", Omitted.exact(9)),
    "head 3 a😀": Row(3, 0, "head", ("a😀",), "a", Omitted.exact(4)),
    "head 3 €x": Row(3, 0, "head", ("€x",), "€", Omitted.exact(1)),
    "head 4 😀x": Row(4, 0, "head", ("😀x",), "😀", Omitted.exact(1)),
    "head 2 aé": Row(2, 0, "head", ("aé",), "a", Omitted.exact(2)),
    "headTail 3/3 abcdefghij": Row(3, 3, "head_tail", ("abcdefghij",), "abchij", Omitted.exact(4)),
    "headTail 3/3 abcdef": Row(3, 3, "head_tail", ("abcdef",), "abcdef", Omitted.none()),
    "tail 4 hello,world": Row(0, 4, "tail", ("hello", "world"), "orld", Omitted.exact(6), ((F, T), (F, T))),
    "tail 3 11,22,33,44": Row(
        0, 3, "tail", ("11", "22", "33", "44"), "344", Omitted.exact(5), ((T, F), (F, T), (F, T), (F, T))
    ),
    "head 2 stray continuations": Row(2, 0, "head", (b"\x80\x80\x7a",), "\ufffd\ufffd", Omitted.exact(1)),
    "head 1 invalid lead": Row(1, 0, "head", (b"\xf8\x61",), "\ufffd", Omitted.exact(1)),
    "head 0 x": Row(0, 0, "head", ("x",), "", Omitted.exact(1), ((F, T),)),
    "headTail 2/2 nothing pushed": Row(2, 2, "head_tail", (), "", Omitted.none()),
}
# Raw-byte rows cannot be given to the one-shot function, which takes text.
TEXT_ROWS = {name: row for name, row in ROWS.items() if all(isinstance(p, str) for p in row.pushes)}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_a_streaming_retainer_keeps_whole_characters_within_its_byte_budgets(row: Row) -> None:
    retainer = row.retainer()
    decisions = [retainer.push(chunk) for chunk in row.pushes]
    result = retainer.finish()

    assert result.text == row.text
    assert result.omitted == row.omitted
    assert result.truncated is (row.omitted.kind == "exact")
    if row.decisions is not None:
        assert decisions == [PushDecision(kept=k, truncated=t) for k, t in row.decisions]


@pytest.mark.parametrize("row", TEXT_ROWS.values(), ids=TEXT_ROWS.keys())
def test_one_shot_retention_gives_what_the_streaming_retainer_gives(row: Row) -> None:
    result = retain_head_tail("".join(row.pushes), row.head, row.tail)

    assert (result.text, result.omitted) == (row.text, row.omitted)


def test_empty_push_is_kept() -> None:
    retainer = TextRetainer.head(0)

    assert retainer.push("") == PushDecision(kept=True, truncated=False)
    assert retainer.push(b"") == PushDecision(kept=True, truncated=False)
