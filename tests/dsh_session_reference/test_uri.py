"""Canonical session URIs: known encodings, strict decoding, round trips."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_host.text import join_surrogate_pairs
from dsh_session_reference import SCHEME, ErrorCode, SessionReferenceError, decode_uri, encode_uri
from dsh_session_reference.errors import render_error_chain, render_error_line

URI_TABLE = [
    ("", "dsh-session:IiI"),
    ("source", "dsh-session:InNvdXJjZSI"),
    ("target", "dsh-session:InRhcmdldCI"),
    ("source-session", "dsh-session:InNvdXJjZS1zZXNzaW9uIg"),
    ("missing", "dsh-session:Im1pc3Npbmci"),
    ("main-session", "dsh-session:Im1haW4tc2Vzc2lvbiI"),
    ('unicode/引号"/slash\\/line\n', "dsh-session:InVuaWNvZGUv5byV5Y-3XCIvc2xhc2hcXC9saW5lXG4i"),
    ("\ud800", "dsh-session:Ilx1ZDgwMCI"),
]


def uri_of_json(json_text: str) -> str:
    return SCHEME + base64.urlsafe_b64encode(json_text.encode("utf-8")).decode("ascii").rstrip("=")


def invalid(uri: str) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as caught:
        decode_uri(uri)
    error = caught.value
    assert error.code == ErrorCode.INVALID_REFERENCE
    assert error.message == str(error)
    return error


def test_scheme() -> None:
    assert SCHEME == "dsh-session:"


@pytest.mark.parametrize(("session_id", "uri"), URI_TABLE)
def test_known_ids_encode_to_their_canonical_uris_and_back(session_id: str, uri: str) -> None:
    assert encode_uri(session_id) == uri
    assert decode_uri(uri) == session_id


def test_a_unicode_id_round_trips() -> None:
    session_id = 'unicode/引号"/slash\\/line\n'
    assert decode_uri(encode_uri(session_id)) == session_id


def test_other_schemes_are_rejected_without_cause() -> None:
    error = invalid("https://example.test")
    assert error.message == 'invalid session reference URI "https://example.test"'
    assert error.cause is None


def test_the_decoded_value_must_be_a_string() -> None:
    assert uri_of_json('{"id":"x"}') == "dsh-session:eyJpZCI6IngifQ"
    error = invalid("dsh-session:eyJpZCI6IngifQ")
    assert isinstance(error.cause, TypeError)
    assert str(error.cause) == "decoded session id is not a string"


def test_non_canonical_trailing_bits_are_rejected() -> None:
    error = invalid("dsh-session:IiJ")
    assert error.message == 'invalid session reference URI "dsh-session:IiJ"'
    assert str(error.cause) == "URI is not canonical"
    assert render_error_chain(error) == 'invalid session reference URI "dsh-session:IiJ": URI is not canonical'


@pytest.mark.parametrize(
    "uri",
    [
        "dsh-session:",
        "dsh-session:IiI=",
        "dsh-session:Ii+",
        "dsh-session:Ii/",
        "dsh-session:Ii I",
        "DSH-SESSION:IiI",
    ],
)
def test_shape_failures_have_no_cause(uri: str) -> None:
    assert invalid(uri).cause is None


@pytest.mark.parametrize(
    "uri",
    [
        uri_of_json('"\\u0061"'),  # an alternative escape
        uri_of_json(' "a"'),  # whitespace
        uri_of_json('"a"x'),  # trailing garbage
        uri_of_json('"\\/"'),  # JS never escapes "/"
        uri_of_json('"\\uD800"'),  # upper-case hex
        uri_of_json("1"),
        uri_of_json("NaN"),
        "dsh-session:InNvdXJjZSIx",  # valid URI with an alphabet char glued on
        "dsh-session:InNvdXJjZSIRI",  # length 1 mod 4
        "dsh-session:-",
        "dsh-session:abc",  # invalid UTF-8
        SCHEME + base64.urlsafe_b64encode(b'"\xed\xa0\x80"').decode().rstrip("="),  # encoded surrogate
        uri_of_json("[" * 100_000),  # nesting too deep for the parser
    ],
)
def test_decoding_failures_after_the_shape_checks_carry_a_cause(uri: str) -> None:
    assert invalid(uri).cause is not None


def test_the_message_quotes_the_uri_as_javascript_would() -> None:
    assert invalid("dsh-session:\n\ud800").message == 'invalid session reference URI "dsh-session:\\n\\ud800"'


@given(st.text(alphabet=st.characters(codec=None, categories=None)))
def test_every_string_round_trips(session_id: str) -> None:
    uri = encode_uri(session_id)
    assert uri.startswith(SCHEME)
    assert "=" not in uri
    # A pair of surrogate code points is the same JS string as the character they encode.
    assert decode_uri(uri) == join_surrogate_pairs(session_id)


# The error type and its chain rendering: URI decoding is where most of them start.


def test_error_fields_and_chaining() -> None:
    cause = ValueError("inner")
    error = SessionReferenceError(ErrorCode.READ_FAILED, "failed to read referenced session: inner", cause)
    assert (error.code, error.message, error.cause, error.__cause__) == (
        "SESSION_REFERENCE_READ_FAILED",
        "failed to read referenced session: inner",
        cause,
        cause,
    )
    plain = SessionReferenceError(ErrorCode.READ_FAILED, "m", "non-error read failure")
    assert plain.cause == "non-error read failure"
    assert plain.__cause__ is None
    with pytest.raises(ValueError, match="unknown session-reference error code"):
        SessionReferenceError("NOPE", "m")


def test_error_codes_are_the_stable_strings() -> None:
    assert {
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REFERENCE,
        ErrorCode.SELF_REFERENCE,
        ErrorCode.TOO_MANY,
        ErrorCode.READ_FAILED,
        ErrorCode.BUDGET_EXCEEDED,
        ErrorCode.CANCELLED,
    } == {
        "SESSION_REFERENCE_INVALID_CONFIG",
        "SESSION_REFERENCE_INVALID_REFERENCE",
        "SESSION_REFERENCE_SELF_REFERENCE",
        "SESSION_REFERENCE_TOO_MANY",
        "SESSION_REFERENCE_READ_FAILED",
        "SESSION_REFERENCE_BUDGET_EXCEEDED",
        "SESSION_REFERENCE_CANCELLED",
    }


def test_render_error_chain() -> None:
    missing = LookupError('session "missing" not found')
    read_failed = SessionReferenceError(
        ErrorCode.READ_FAILED, 'failed to read referenced session: session "missing" not found', missing
    )
    assert render_error_chain(read_failed) == (
        'failed to read referenced session: session "missing" not found: session "missing" not found'
    )
    assert render_error_chain(RuntimeError()) == "RuntimeError"
    assert render_error_chain("plain value") == "plain value"
    assert render_error_chain(SessionReferenceError(ErrorCode.CANCELLED, "m", "why")) == "m: why"
    repeated = SessionReferenceError(ErrorCode.READ_FAILED, "same", RuntimeError("same"))
    assert render_error_chain(repeated) == "same"
    outer, inner = RuntimeError("outer"), RuntimeError("inner")
    outer.__cause__, inner.__cause__ = inner, outer
    assert render_error_chain(outer) == "outer: inner"


def test_render_error_line_names_each_cause_once() -> None:
    missing = LookupError('session "missing" not found')
    read_failed = SessionReferenceError(
        ErrorCode.READ_FAILED, 'failed to read referenced session: session "missing" not found', missing
    )
    assert render_error_line(read_failed) == 'failed to read referenced session: session "missing" not found'
    # A cause that is only part of a clause is a cause of its own, and so is one the line does not hold.
    assert render_error_line(SessionReferenceError(ErrorCode.CANCELLED, "not found here", "found")) == (
        "not found here: found"
    )
    assert render_error_line(SessionReferenceError(ErrorCode.CANCELLED, "m", "why")) == "m: why"
    outer, inner = RuntimeError("outer"), RuntimeError("inner")
    outer.__cause__, inner.__cause__ = inner, outer
    assert render_error_line(outer) == "outer: inner"
    assert render_error_line(RuntimeError()) == "RuntimeError"
