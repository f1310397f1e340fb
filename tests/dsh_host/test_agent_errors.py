"""Error-chain rendering for durable `turn/end` reasons."""

from __future__ import annotations

import sys

import pytest

from dsh_host.agent.errors import error_reason, failure_reason, render_error
from dsh_host.models.base import ModelFailure


def chained(message: str, cause: BaseException) -> Exception:
    error = RuntimeError(message)
    error.__cause__ = cause
    return error


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_a_simple_error_renders_its_message():
    assert render_error(ValueError("prompt hook broke")) == "prompt hook broke"


def test_an_empty_message_renders_the_class_name():
    assert render_error(KeyError()) == "KeyError"


def test_a_cause_is_appended_after_a_colon():
    assert render_error(chained("fetch failed", ConnectionResetError("ECONNRESET"))) == "fetch failed: ECONNRESET"
    assert render_error(chained("a", chained("b", OSError("c")))) == "a: b: c"


def test_a_cause_rendering_like_the_message_is_not_repeated():
    assert render_error(chained("same", ValueError("same"))) == "same"


def test_a_circular_cause_is_marked():
    first = RuntimeError("first")
    second = chained("second", first)
    first.__cause__ = second
    assert render_error(first) == "first: second: <circular cause>"


def test_an_unrenderable_value():
    assert render_error(Unprintable()) == "<unrenderable value>"
    assert render_error(chained("outer", Unprintable())) == "outer: <unrenderable value>"


def test_a_non_exception_renders_as_its_string():
    assert render_error(42) == "42"


def test_implicit_context_is_not_a_cause():
    try:
        try:
            raise OSError("inner")
        except OSError:
            raise ValueError("outer") from None
    except ValueError as error:
        assert render_error(error) == "outer"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception groups are 3.11+")
def test_group_members_are_listed():
    group = ExceptionGroup("several", [ValueError("a"), chained("b", OSError("c"))])  # noqa: F821
    assert render_error(group) == "several [a; b: c]"


def test_error_reason_carries_a_string_code_only():
    coded = ModelFailure("boom", "E_BOOM")
    assert error_reason(2, coded) == {"kind": "error", "step": 2, "message": "boom", "code": "E_BOOM"}
    numeric = SystemExit(3)
    assert error_reason(0, numeric) == {"kind": "error", "step": 0, "message": "3"}


def test_failure_reason_replaces_the_message_with_the_chain():
    error = ModelFailure("fetch failed", "NETWORK", status=502)
    error.__cause__ = OSError("ECONNRESET")
    failure = {"message": "fetch failed", "code": "NETWORK", "status": 502}
    assert failure_reason(1, failure, error) == {
        "kind": "error",
        "step": 1,
        "failure": {"message": "fetch failed: ECONNRESET", "code": "NETWORK", "status": 502},
    }
    assert failure_reason(1, failure, Unprintable())["failure"]["message"] == "fetch failed"
