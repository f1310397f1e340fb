"""Decisions returned by the `dsh_prompt_submit` waterfall."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Allow:
    """Admit the prompt.

    `content`, when not None (even `[]`), replaces the prompt blocks. `additional_contexts` is
    the complete list of contexts to materialise; None means none.
    """

    content: Sequence[Mapping[str, Any]] | None = None
    additional_contexts: Sequence[Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Block:
    """Veto the prompt: the turn logs `prompt/blocked` and ends `rejected` with `reason`."""

    reason: str


PromptDecision = Allow | Block
