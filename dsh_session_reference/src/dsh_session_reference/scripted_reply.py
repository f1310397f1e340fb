"""What the keyless scripted model answers a message carrying a referenced-session snapshot with.

Registered through `dsh_scripted_reply`: it reads the snapshot's JSON back and names the
sessions it saw, then echoes the request after the delimiter, so a keyless turn shows that the
snapshot arrived as background.
"""

from __future__ import annotations

import json
import re

from dsh_host import ModelRequest
from dsh_host.log import PROMPT_DELIMITER
from dsh_host.models import message_text, unanswered_messages
from dsh_host.text import shorten_text

REPLY_LIMIT = 200  # as much of the request as the scripted model's own echo quotes
_REFERENCED = re.compile(r"<referenced-sessions>\n?(.*?)\n?</referenced-sessions>", re.DOTALL)


def scripted_reply(request: ModelRequest) -> str | None:
    """The acknowledgement when an unanswered message holds a snapshot, else None."""
    # Separate contexts may follow the prompt that carries the referenced sessions.
    pending = map(message_text, unanswered_messages(request.messages))
    referencing = next((text for text in pending if "<referenced-sessions>" in text), None)
    return _referenced_reply(referencing) if referencing is not None else None


def _referenced_reply(text: str) -> str:
    match = _REFERENCED.search(text)
    try:
        snapshot = json.loads(match.group(1)) if match else None
    except ValueError:
        snapshot = None
    after = text[match.end() :] if match else text
    request = after.split(PROMPT_DELIMITER, 1)[1] if PROMPT_DELIMITER in after else ""
    answer = (
        f"Scripted reply: {shorten_text(request, REPLY_LIMIT)}" if request.strip() else "Scripted reply: (no request)"
    )
    if not isinstance(snapshot, list):
        return f"I could not read the referenced-session snapshot. {answer}"
    labels = [
        str(item.get("label") or item.get("sessionId") or "?") if isinstance(item, dict) else "?" for item in snapshot
    ]
    count = len(labels)
    names = ", ".join(json.dumps(label, ensure_ascii=False) for label in labels)
    what = f"{count} session{'s' * (count != 1)}: {names}" if count else "no sessions"
    return f"I read the referenced-session snapshot ({what}) as background. {answer}"
