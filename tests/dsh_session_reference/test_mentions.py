"""Mention markup and parsing mentions out of free text, mirroring the JS regex exactly."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_host.text import join_surrogate_pairs
from dsh_session_reference import (
    ErrorCode,
    ParsedText,
    SessionReferenceError,
    SessionReferenceInput,
    encode_uri,
    format_mention,
    parse_reference,
    parse_text,
)

U = "dsh-session:InNvdXJjZSI"  # the URI of "source"
SOURCE = SessionReferenceInput("source", "source")
UNICODE_ID = 'unicode/引号"/slash\\/line\n'


def ref(session_id: str, label: str) -> SessionReferenceInput:
    return SessionReferenceInput(session_id, label)


def assert_invalid(text: str) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as caught:
        parse_text(text)
    assert caught.value.code == ErrorCode.INVALID_REFERENCE
    return caught.value


@pytest.mark.parametrize(
    ("session_id", "label", "expected"),
    [
        ("source", None, "@[source](dsh-session:InNvdXJjZSI)"),
        ("source-session", "Source session", "@[Source session](dsh-session:InNvdXJjZS1zZXNzaW9uIg)"),
        ("a]b\\c", None, "@[a\\]b\\\\c](dsh-session:ImFdYlxcYyI)"),
        ("source", "源]会话", "@[源\\]会话](dsh-session:InNvdXJjZSI)"),
        ("source", "[(x)\n\"\x1b'", "@[[(x)\n\"\x1b'](dsh-session:InNvdXJjZSI)"),
        ("source", "", "@[](dsh-session:InNvdXJjZSI)"),
    ],
)
def test_format_mention(session_id: str, label: str | None, expected: str) -> None:
    assert format_mention(session_id, label) == expected


def test_the_default_label_is_the_escaped_id() -> None:
    mention = format_mention(UNICODE_ID)
    escaped = UNICODE_ID.replace("\\", "\\\\").replace("]", "\\]")
    assert mention == f"@[{escaped}]({encode_uri(UNICODE_ID)})"


@pytest.mark.parametrize(
    ("text", "expected_text", "references"),
    [
        (f"see {U}. and `{U}`", "see @source. and `@source`", [SOURCE, SOURCE]),
        (f"({U})", "(@source)", [SOURCE]),
        (f"{U}).", "@source).", [SOURCE]),
        ("see dsh-session:IiI,", "see @,", [ref("", "")]),
        (f"@[]({U})", "@", [ref("source", "")]),
        (f"@[l\\[x\\]]({U})", "@l[x]", [ref("source", "l[x]")]),
        (f"@[a\\\\]({U})", "@a\\", [ref("source", "a\\")]),
        (f"@[a\\]({U})", "@[a\\](@source)", [SOURCE]),
        (f"@[a\\\nb]({U})", "@[a\\\nb](@source)", [SOURCE]),
        (f"@[a\\\rb]({U})", "@[a\\\rb](@source)", [SOURCE]),
        (f"@[a\\\u2028b]({U})", "@[a\\\u2028b](@source)", [SOURCE]),
        (f"@[a\\\u2029b]({U})", "@[a\\\u2029b](@source)", [SOURCE]),
        (f"@[a\nb]({U})", "@a\nb", [ref("source", "a\nb")]),
        (f"@[a\\\x85b]({U})", "@a\x85b", [ref("source", "a\x85b")]),
        (f"@[lbl]({U} extra)", "@[lbl](@source extra)", [SOURCE]),
        (f"@[lbl]({U}\ufeff)", "@[lbl](@source\ufeff)", [SOURCE]),
        (f"@[lbl]({U}\u3000)", "@[lbl](@source\u3000)", [SOURCE]),
        (f"@[$&]({U})", "@$&", [ref("source", "$&")]),
        (f"@[\\1 \\g<0>]({U})", "@1 g<0>", [ref("source", "1 g<0>")]),
        (f"x{U}!", "x@source!", [SOURCE]),
        ("what is a dsh-session: URI?", "what is a dsh-session: URI?", []),
        ("see dsh-session:%%%", "see dsh-session:%%%", []),
        ("@[x](https://example.test)", "@[x](https://example.test)", []),
        ("", "", []),
    ],
)
def test_parse_text_table(text: str, expected_text: str, references: list[SessionReferenceInput]) -> None:
    assert parse_text(text) == ParsedText(expected_text, references)


def test_explicit_and_bare_mentions_are_both_parsed() -> None:
    text = f"compare {format_mention(UNICODE_ID, '源]会话')} and {encode_uri(UNICODE_ID)}"
    assert parse_text(text) == ParsedText(
        f"compare @源]会话 and @{UNICODE_ID}", [ref(UNICODE_ID, "源]会话"), ref(UNICODE_ID, UNICODE_ID)]
    )


def test_trailing_punctuation_stays_outside_the_mention() -> None:
    uri = encode_uri(UNICODE_ID)
    assert parse_text(f"see {uri}. and `{uri}`") == ParsedText(
        f"see @{UNICODE_ID}. and `@{UNICODE_ID}`", [ref(UNICODE_ID, UNICODE_ID)] * 2
    )


@pytest.mark.parametrize(
    "text",
    [
        "see dsh-session:IiJ",  # bare, base64url-shaped, not canonical
        "@[bad](dsh-session:%%%)",  # explicit, malformed
        "@[x](dsh-session:)",
        f"@[x]({U}\x1c)",  # \x1c is not JS whitespace, so it belongs to the URI
        f"@[x]({U}\x85)",
        "dsh-session:abc",
        "dsh-session:-",
        "dsh-session:InNvdXJjZSIx",
        f"fine {U} then dsh-session:IiJ",  # no partial result
    ],
)
def test_any_bad_uri_fails_the_whole_parse(text: str) -> None:
    assert_invalid(text)


def test_the_error_names_the_offending_uri() -> None:
    assert assert_invalid(f"{U} dsh-session:IiJ").message == 'invalid session reference URI "dsh-session:IiJ"'


def test_records_are_frozen() -> None:
    parsed = parse_text(U)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.text = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.references[0].label = "x"  # type: ignore[misc]
    assert SessionReferenceInput("id").label is None


ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None))


@given(ANY_TEXT, ANY_TEXT)
def test_parse_inverts_format(session_id: str, label: str) -> None:
    parsed = parse_text(format_mention(session_id, label))
    assert parsed == ParsedText("@" + label, [ref(join_surrogate_pairs(session_id), label)])


@given(ANY_TEXT)
def test_default_label_round_trips(session_id: str) -> None:
    parsed = parse_text(format_mention(session_id))
    assert parsed.text == "@" + session_id
    assert parsed.references == [ref(join_surrogate_pairs(session_id), session_id)]


# --- one reference on its own: an id, a URI or one mention ----------------------------------


@given(ANY_TEXT, ANY_TEXT)
def test_one_mention_is_its_session_and_label(session_id: str, label: str) -> None:
    assert parse_reference(format_mention(session_id, label)) == ref(join_surrogate_pairs(session_id), label)


@given(ANY_TEXT)
def test_one_uri_is_its_session_without_a_label(session_id: str) -> None:
    assert parse_reference(encode_uri(session_id)) == SessionReferenceInput(join_surrogate_pairs(session_id))


@given(ANY_TEXT.filter(lambda text: not text.startswith(("@[", "dsh-session:"))))
def test_anything_else_is_a_session_id_as_given(text: str) -> None:
    assert parse_reference(text) == SessionReferenceInput(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dsh-session:", 'invalid session reference URI "dsh-session:"'),
        (U + "=", f'invalid session reference URI "{U}="'),
        (U + " and more", f'invalid session reference URI "{U} and more"'),
        ("@[label]", 'not one session mention: "@[label]"'),
        (f"@[a]({U}) and more", f'not one session mention: "@[a]({U}) and more"'),
        (f"@[a]({U}", f'not one session mention: "@[a]({U}"'),
        ("@[a](dsh-session:!!)", 'invalid session reference URI "dsh-session:!!"'),
    ],
)
def test_text_that_starts_like_a_uri_or_a_mention_must_be_exactly_one(text: str, message: str) -> None:
    with pytest.raises(SessionReferenceError) as caught:
        parse_reference(text)
    assert (caught.value.code, str(caught.value)) == (ErrorCode.INVALID_REFERENCE, message)
