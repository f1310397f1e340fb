"""What a typed text becomes before it is sent: content blocks and the contexts riding with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dsh_host.errors import DshError
from dsh_host.jsontypes import Json, JsonValue  # imported at run time for typing.get_type_hints


@dataclass(frozen=True)
class Composition:
    """The message `Agent.compose` builds from a text: what `send`/`steer` are given.

    `content` is a list of content blocks; `contexts` are the context mappings that ride with
    the message (session references put their snapshot here). `to_json()` is the pair as plain
    JSON, as `dsh ref preview --json` prints it.
    """

    content: Sequence[Json]
    contexts: Sequence[Json] = field(default_factory=tuple)

    @classmethod
    def text(cls, text: str) -> Composition:
        """The text as typed: one text block, no contexts."""
        return cls(({"type": "text", "text": text},))

    def to_json(self) -> dict[str, JsonValue]:
        return {"content": list(self.content), "contexts": list(self.contexts)}


class ComposeError(DshError):
    """A text could not be composed into a message; nothing was sent.

    Its message is the one line a host shows (the feature's own wording); `code` is the
    feature's stable error code, when it has one.
    """
