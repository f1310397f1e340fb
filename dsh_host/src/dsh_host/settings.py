"""Readers for a plugin's configuration table (public namespace `dsh_host.settings`).

Each reader takes the table's name (for example `plugins.compact`), the table itself and a key,
and raises `dsh_host.ConfigError` naming the table, the key and the offending value, so every
plugin reports a bad configuration the same way::

    from dsh_host.settings import read_int, reject_unknown

    reject_unknown("plugins.hello", config, ("times",))
    times = read_int("plugins.hello", config, "times", 1, minimum=1)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import overload

from dsh_host.errors import ConfigError

__all__ = ["format_value", "read_bool", "read_float", "read_int", "read_str", "reject_unknown"]


def reject_unknown(table: str, config: Mapping[str, object], known: Iterable[str]) -> None:
    """Fail on the first key of `config` that is not in `known`."""
    allowed = set(known)
    for key in config:
        if key not in allowed:
            expected = f"known: {', '.join(sorted(allowed))}" if allowed else "it takes no keys"
            raise ConfigError(f"[{table}] unknown key {key!r} ({expected})")


@overload
def read_int(
    table: str,
    config: Mapping[str, object],
    key: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int: ...
@overload
def read_int(
    table: str,
    config: Mapping[str, object],
    key: str,
    default: int | None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None: ...
def read_int(
    table: str,
    config: Mapping[str, object],
    key: str,
    default: int | None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    """An integer (booleans and floats rejected) within `minimum..maximum`, or the default."""
    if key not in config:
        return default
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"[{table}] {key} must be an integer{_range(minimum, maximum)}, got {format_value(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ConfigError(f"[{table}] {key} must be an integer{_range(minimum, maximum)}, got {format_value(value)}")
    return value


@overload
def read_float(
    table: str,
    config: Mapping[str, object],
    key: str,
    default: float,
    *,
    above: float | None = None,
    at_most: float | None = None,
) -> float: ...
@overload
def read_float(
    table: str,
    config: Mapping[str, object],
    key: str,
    default: float | None,
    *,
    above: float | None = None,
    at_most: float | None = None,
) -> float | None: ...
def read_float(
    table: str,
    config: Mapping[str, object],
    key: str,
    default: float | None,
    *,
    above: float | None = None,
    at_most: float | None = None,
) -> float | None:
    """A finite number in `(above, at_most]`, or the default."""
    if key not in config:
        return default
    value = config[key]
    bounds = f" in ({above}, {at_most}]" if above is not None and at_most is not None else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"[{table}] {key} must be a number{bounds}, got {format_value(value)}")
    if (above is not None and value <= above) or (at_most is not None and value > at_most):
        raise ConfigError(f"[{table}] {key} must be a number{bounds}, got {format_value(value)}")
    return float(value)


def read_bool(table: str, config: Mapping[str, object], key: str, default: bool) -> bool:
    """A boolean (`true`/`false` only), or the default."""
    if key not in config:
        return default
    value = config[key]
    if not isinstance(value, bool):
        raise ConfigError(f"[{table}] {key} must be true or false, got {format_value(value)}")
    return value


@overload
def read_str(table: str, config: Mapping[str, object], key: str, default: str) -> str: ...
@overload
def read_str(table: str, config: Mapping[str, object], key: str, default: str | None) -> str | None: ...
def read_str(table: str, config: Mapping[str, object], key: str, default: str | None) -> str | None:
    """A string, or the default."""
    if key not in config:
        return default
    value = config[key]
    if not isinstance(value, str):
        raise ConfigError(f"[{table}] {key} must be a string, got {format_value(value)}")
    return value


def format_value(value: object) -> str:
    """A configuration value as TOML would write it (`true`, `"text"`, `1.5`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" in {minimum}..{maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""
