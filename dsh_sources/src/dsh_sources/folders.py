"""Listing the folders agents keep their sessions in, where a missing or unreadable folder holds nothing."""

from __future__ import annotations

import os


def names(folder: str | os.PathLike[str], suffix: str = "") -> list[str]:
    """The names in `folder` ending with `suffix`, sorted (none when it is missing or unreadable)."""
    try:
        return sorted(name for name in os.listdir(folder) if name.endswith(suffix))
    except OSError:
        return []
