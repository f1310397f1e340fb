"""Decisions returned by the `dsh_prompt_submit` and `dsh_agent_turn_continuation` waterfalls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsh_host.jsontypes import Json  # imported at run time for typing.get_type_hints


@dataclass(frozen=True)
class Allow:
    """Admit the prompt.

    `content`, when not None (even `[]`), replaces the prompt blocks. `additional_contexts` is
    the complete list of contexts to materialise; None means none.
    """

    content: Sequence[Json] | None = None
    additional_contexts: Sequence[Json] | None = None


@dataclass(frozen=True)
class Block:
    """Veto the prompt: the turn logs `prompt/blocked` and ends `rejected` with `reason`."""

    reason: str


PromptDecision = Allow | Block


@dataclass(frozen=True)
class Continue:
    """Run another step of the turn.

    `content`, when not None, is steering the loop adds before that step (a string is one text
    block), from `source` (None: `{kind: 'user'}`); it carries no contexts and is not announced
    through `dsh_agent_queued`.
    """

    content: Sequence[Json] | str | None = None
    source: Json | None = None


@dataclass(frozen=True)
class Stop:
    """End the turn after this step, unless steering is still pending (steering always gets a step)."""


ContinuationDecision = Continue | Stop
