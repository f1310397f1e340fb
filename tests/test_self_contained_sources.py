"""Sources say what they mean in their own words: no comment, docstring or string in the Python
sources cites a section of a design document or a path outside the repository, and no test is
named after a case number of such a document.

A reader has only the repository: "spec 9.2" or "see ../shared" sends them to a document they
do not have. Where the behaviour matters, the source says it, and docs/ says it for users.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = [*sorted(ROOT.glob("dsh_*/src")), ROOT / "tests", ROOT / "bench", ROOT / "examples"]
SOURCES = sorted(
    path
    for folder in FOLDERS
    for path in folder.rglob("*.py")
    if "node_modules" not in path.parts and path != Path(__file__).resolve()
)

EXTERNAL_CITATION = re.compile(
    r"""
    \bspec(?:'s)?\s+(?:section\s+)?\d                           # spec 1.6, spec section 5, the spec's 7.1
    | \bsections?\s+\d                                          # section 1.2, (section 4)
    | §\s*\d                                                    # §10.1
    | \bthe\s+spec(?:'s)?\b                                     # as the spec says, the spec's order
    | \b(?:agent-inbox-loop|session-core|compact-retention|other-agents)\b  # the documents by name
    | \bsession-reference\s+spec\b | \bspec\s+session-reference\b
    | \.\./shared\b(?!/fixtures/reference-logs) | /work/shared\b  # the design documents (the reference
    | (?-i:\bARCHITECTURE\.md\b)                                # logs beside the repository are test input)
    """,
    re.IGNORECASE | re.VERBOSE,
)

# A test named after a case of a document: test_item7_..., test_p4_..., test_spec_2_4_..., test_example_a_...
CASE_NAME = re.compile(r"(?:^|_)(?:[a-z]\d+[a-z]?|item\d+|spec_\d+|section_\d+|example_[a-f])(?:_|$)")


def citations(text: str) -> list[tuple[int, str]]:
    """Each external citation in `text`: its line number and the matched words."""
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for m in EXTERNAL_CITATION.finditer(text)]


@pytest.mark.parametrize(
    "text",
    [
        "# The hooks of spec agent-inbox-loop, section 5.",
        '"""The submission flow of session-reference spec 9.3."""',
        "# every event lies in a turn (spec 1.6)",
        "# ranked as the spec's candidates are",
        "x = 1  # the shape rules (section 1.2)",
        "# see ../shared/spec for the golden values",
        "# as in compact-retention 10.1",
        "# The Spec's 7.3 golden prompt",
        "# the conversation log (§10.1)",
    ],
)
def test_a_citation_of_an_outside_document_is_found(text: str) -> None:
    assert citations(text)


@pytest.mark.parametrize(
    "text",
    [
        "model = resolve(spec)  # a `provider[:model]` spec",
        "spec = policy.scale(target, window)",
        "hookspec = pluggy.HookspecMarker('dsh')",
        "from importlib.util import find_spec",
        "PLUGIN = 'session-reference'  # the session-reference plugin",
        "for section, table in loaded.items():",
        "# beside it at ../shared/fixtures/reference-logs (as in CI)",
        "the specification of each hook",
    ],
)
def test_ordinary_uses_of_the_words_are_not_citations(text: str) -> None:
    assert citations(text) == []


def test_the_sources_are_found() -> None:
    assert len(SOURCES) > 100
    assert ROOT / "tests" / "conftest.py" in SOURCES


def test_no_source_cites_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {words!r}"
        for path in SOURCES
        for line, words in citations(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "say the behaviour in words instead of citing:\n" + "\n".join(found)


def test_names_citing_a_case_number_are_found() -> None:
    cited = ["test_item7_replace_range_errors", "test_p4_self_reference", "test_u1a_round_trips", "test_spec_2_4_f"]
    plain = ["test_utf8_lengths", "test_read_surface_of_a_nested_replace", "test_c_strings", "test_sha256_of_a_log"]
    assert [bool(CASE_NAME.search(name)) for name in cited + plain] == [True] * 4 + [False] * 4


def test_no_test_is_named_after_a_case_number() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test_")
        and CASE_NAME.search(node.name.removeprefix("test"))
    ]
    assert found == [], "name each test for the behaviour it pins:\n" + "\n".join(found)
