"""Naming and importing the PostgreSQL store, for its plugin and its commands alike.

Kept apart from both so neither imports the other, and so psycopg is imported only when a
PostgreSQL store is actually used.
"""

from __future__ import annotations

from typing import Any

from dsh_host.errors import ConfigError

STORE = "postgres"


def postgres_module() -> Any:
    """The store module, or a ConfigError saying how to install it."""
    try:
        from dsh_host.store import postgres
    except ImportError as exc:
        raise ConfigError(
            f"[host] store = \"postgres\" needs psycopg: pip install 'dsh-host[postgres]' ({exc})"
        ) from None
    return postgres
