"""Errors the host reports to users as one line."""

from __future__ import annotations


class DshError(Exception):
    """An error with a message fit for a user; the CLI prints it as `dsh: error: <message>`."""

    exit_code = 1


class ConfigError(DshError):
    """Invalid configuration or usage (exit code 2)."""

    exit_code = 2


class PluginError(DshError):
    """A plugin could not be found, imported or mounted (exit code 2)."""

    exit_code = 2
