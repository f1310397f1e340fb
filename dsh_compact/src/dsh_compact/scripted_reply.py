"""What the keyless scripted model answers a compaction request with: a structured checkpoint.

Registered through `dsh_scripted_reply`, so a keyless host compacts deterministically: the
checkpoint quotes the first and the latest user requests, names the latest tool calls and
counts what it condensed, under the headings the compaction instruction asks for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_host import ModelRequest
from dsh_host.models import message_text
from dsh_host.text import shorten_text

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json

COMPACTION_MARKER = "acting as a compaction engine"
"""The phrase of the compaction instruction that marks a summary request without a purpose."""

_QUOTE_LIMIT = 80
_QUOTE_FLOOR = 40  # below this a quote stops being recognisable; tiny inputs need no shrinking
_PRIOR_PRIMARY = re.compile(r"## Primary Request and Intent\n- (.+)")


def scripted_reply(request: ModelRequest, purpose: str) -> str | None:
    """The checkpoint for a summary request (by `purpose`, or by the instruction's text), else None."""
    if request.purpose == purpose or is_compaction(request.messages):
        return compaction_summary(request.messages)
    return None


def is_compaction(messages: Sequence[Json]) -> bool:
    """True when the last message is the compaction instruction."""
    return bool(messages) and COMPACTION_MARKER in message_text(messages[-1])


def compaction_summary(messages: Sequence[Json]) -> str:
    """A structured checkpoint of `messages` under the compaction instruction's headings.

    It quotes the first and the latest user requests, names the latest tool calls, and counts
    what it condensed. Quotes shrink with the input, so the checkpoint of an input of more than
    a few hundred characters is clearly shorter than that input.
    """
    condensed = list(messages)
    if is_compaction(condensed):
        condensed.pop()  # the instruction itself is not part of the conversation
    digest = _Digest.of(condensed)
    # The original request comes from an earlier checkpoint when there is one, else it is the
    # first request here; the latest few of the others follow it.
    first = [] if digest.prior_request else digest.requests[:1]
    later = digest.requests[len(first) :][-3:]
    items = len(first) + len(later) + len(digest.calls[-3:])
    limit = max(_QUOTE_FLOOR, min(_QUOTE_LIMIT, digest.chars // (4 * max(items, 1))))

    def quote(text: str) -> str:
        return json.dumps(shorten_text(text, limit), ensure_ascii=False)

    primary = digest.prior_request or (quote(first[0]) if first else "(none)")
    sections = {
        "Primary Request and Intent": [primary],
        "Key Technical Concepts": [
            f"{len(condensed)} messages: {len(digest.requests)} requests, {len(digest.calls)} tool calls"
        ],
        "Files and Code": [shorten_text(call, limit) for call in digest.calls[-3:]],
        "Errors and Fixes": [f"{digest.errors} tool calls failed"] if digest.errors else [],
        "Pending Tasks": [],
        "Current Work": [quote(text) for text in later[-1:]],
        "Next Step": [],
        "Critical Context": [f"earlier request: {quote(text)}" for text in later[:-1]],
    }
    return "\n\n".join(
        f"## {heading}\n" + "\n".join(f"- {bullet}" for bullet in (bullets or ["(none)"]))
        for heading, bullets in sections.items()
    )


@dataclass(frozen=True)
class _Digest:
    """What a checkpoint keeps of the condensed messages."""

    requests: list[str]  # user texts, oldest first
    prior_request: str | None  # the primary request of an earlier checkpoint among them
    calls: list[str]  # "name arguments" of each tool call
    errors: int  # tool results flagged as errors
    chars: int  # the size of the condensed text

    @classmethod
    def of(cls, messages: Sequence[Json]) -> _Digest:
        requests: list[str] = []
        prior: str | None = None
        calls: list[str] = []
        errors = chars = 0
        for message in messages:
            for block in message.get("content", ()):
                chars += _block_chars(block)
                if block.get("type") == "tool-call":
                    calls.append(f"{block.get('name', '')} {block.get('arguments', '')}")
                elif block.get("type") == "tool-result":
                    errors += bool(block.get("isError"))
            text = message_text(message) if message.get("role") == "user" else ""
            if "<compacted-summary>" in text:
                # An earlier checkpoint: carry its original request forward, do not quote it.
                match = _PRIOR_PRIMARY.search(text)
                if match and not requests and prior is None:
                    prior = match.group(1)
            elif text.strip():
                requests.append(text)
        return cls(requests, prior, calls, errors, chars)


def _block_chars(block: Json) -> int:
    if block.get("type") == "tool-result":
        return sum(_block_chars(inner) for inner in block.get("content", ()))
    return sum(len(block.get(key) or "") for key in ("text", "name", "arguments"))
