"""Validation of retention budgets."""

from __future__ import annotations


def validate_budget(field: str, value: object) -> int:
    """Return `value` as an int if it is a non-negative integer, else raise ValueError.

    `field` is the name the error reports (`maxBytes`, `headBytes`, ...), as the reference
    names them. The test follows JavaScript's `Number.isInteger`: a bool is not a number,
    while an integral float such as `2.0` is an integer.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value < 0
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise ValueError(f"{field} must be a non-negative integer")
    return int(value)
