"""The error family of dsh: every error a user can see is a `DshError`.

A `DshError`'s `str()` is one line fit for a user (the CLI prints it as `dsh: error: <message>`
and exits with its `exit_code`); `code` is a stable machine-readable code where the feature has
one (`RATE_LIMIT`, `SESSION_REFERENCE_TOO_MANY`, ...), None otherwise. Errors that callers have
long caught as a built-in type (`ValueError` for a bad event, `TypeError` for a value that is not
JSON) derive from that type too, so both `except` clauses keep working.
"""

from __future__ import annotations


class DshError(Exception):
    """An error with a message fit for a user, and an optional stable `code`."""

    exit_code = 1

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class ConfigError(DshError):
    """Invalid configuration or usage (exit code 2); the message names the table, key and value."""

    exit_code = 2


class PluginError(DshError):
    """A plugin could not be found, imported or mounted (exit code 2)."""

    exit_code = 2
