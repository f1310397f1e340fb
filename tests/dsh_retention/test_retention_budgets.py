"""Budget validation: each budget is a non-negative safe integer, named in the error."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_retention import ItemRetainer, TextRetainer, retain_head_tail

BAD_BUDGETS: dict[str, tuple[str, Callable[[], object]]] = {
    "maxItems -1": ("maxItems", lambda: ItemRetainer(-1)),
    "maxItems 1.5": ("maxItems", lambda: ItemRetainer(1.5)),  # type: ignore[arg-type]
    "maxBytes -1 head": ("maxBytes", lambda: TextRetainer.head(-1)),
    "maxBytes 2.5 tail": ("maxBytes", lambda: TextRetainer.tail(2.5)),  # type: ignore[arg-type]
    "headBytes -1": ("headBytes", lambda: TextRetainer.head_tail(-1, 2)),
    "tailBytes 1.1": ("tailBytes", lambda: TextRetainer.head_tail(2, 1.1)),  # type: ignore[arg-type]
    "maxItems True": ("maxItems", lambda: ItemRetainer(True)),
    "maxBytes '3'": ("maxBytes", lambda: TextRetainer.head("3")),  # type: ignore[arg-type]
    "maxBytes inf": ("maxBytes", lambda: TextRetainer.tail(float("inf"))),  # type: ignore[arg-type]
    "maxBytes nan": ("maxBytes", lambda: TextRetainer.tail(float("nan"))),  # type: ignore[arg-type]
    "one-shot headBytes": ("headBytes", lambda: retain_head_tail("x", -1, 0)),
    "one-shot tailBytes": ("tailBytes", lambda: retain_head_tail("x", 0, 0.5)),  # type: ignore[arg-type]
}


@pytest.mark.parametrize(("field", "build"), BAD_BUDGETS.values(), ids=BAD_BUDGETS.keys())
def test_bad_budget_names_the_field(field: str, build: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match=f"^{field} must be a non-negative integer$"):
        build()


def test_integral_float_is_an_integer_as_in_javascript() -> None:
    retainer = TextRetainer.head(2.0)  # type: ignore[arg-type]
    retainer.push("abc")

    assert retainer.finish().text == "ab"


def test_push_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="chunk must be str or bytes, not int"):
        TextRetainer.head(1).push(3)  # type: ignore[arg-type]
