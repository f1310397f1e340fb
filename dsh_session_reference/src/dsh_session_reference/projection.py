"""Project one surface snapshot to the human-readable conversation a reference shows the model.

Only direct human prompts, compaction checkpoints and assistant text survive: plugin-generated
prompts, tool output, injected contexts and reasoning are left out, and a prompt that itself
carried a baked snapshot contributes only its display content, so snapshots never nest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from dsh_compact.marker import is_compact_checkpoint_source
from dsh_session_reference.jsjson import join_surrogate_pairs

Role = Literal["user", "assistant"]


class SessionHeaderLike(Protocol):
    """The part of a session header a projection reads."""

    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str | None: ...


@dataclass(frozen=True)
class ProjectedMessage:
    """One conversation entry; ``checkpoint`` marks a compaction summary."""

    role: Role
    text: str
    checkpoint: bool = False


@dataclass(frozen=True)
class ProjectedSource:
    """A referenced session reduced to what the model may see, before any byte budget."""

    session_id: str
    cwd: str | None
    captured_through_seq: int | None
    messages: tuple[ProjectedMessage, ...]

    @property
    def compacted(self) -> bool:
        """Whether the surface holds a compaction checkpoint."""
        return any(message.checkpoint for message in self.messages)


def project_surface(
    session: SessionHeaderLike,
    captured_through_seq: int | None,
    events: Iterable[Mapping[str, Any]],
) -> ProjectedSource:
    """Project surface ``events`` (log JSON form, model-history order) of ``session``.

    ``captured_through_seq`` is passed through: it is the seq of the snapshot's last log event
    of any type, which need not be a surface event.
    """
    messages = []
    for event in events:
        message = project_event(event)
        if message is not None:
            messages.append(message)
    return ProjectedSource(session.id, session.cwd, captured_through_seq, tuple(messages))


def project_event(event: Mapping[str, Any]) -> ProjectedMessage | None:
    """The conversation entry for one surface event, or ``None`` when it contributes nothing."""
    event_type = event.get("type")
    data = event.get("data")
    if type(data) is not dict and not isinstance(data, Mapping):
        return None
    if event_type == "assistant/message":
        role: Role = "assistant"
        checkpoint = False
        content = data.get("content")
    elif event_type == "user/message" or event_type == "steering/message":
        source = data.get("source")
        # Only a user/message can be a checkpoint; compaction's steering is plugin noise.
        checkpoint = event_type == "user/message" and is_compact_checkpoint_source(source)
        if not checkpoint and not _is_user_source(source):
            return None
        role = "user"
        content = display_content(data)
    else:
        return None
    text = extract_text(content)
    if text == "":
        return None
    return ProjectedMessage(role, text, checkpoint)


def display_content(data: Mapping[str, Any]) -> Any:
    """The content a prompt event shows a human: the envelope's, else the model content."""
    envelope = data.get("envelope")
    if isinstance(envelope, Mapping) and envelope.get("displayContent") is not None:
        return envelope["displayContent"]
    return data.get("content")


def extract_text(content: Any) -> str:
    """Join the ``text`` of every text block with newlines; other block types are ignored.

    A surrogate pair spelled as two code points is joined into one character, as the same
    string would be in JavaScript, so byte counts and cuts downstream match the reference.
    """
    if type(content) is not list and (not isinstance(content, Sequence) or isinstance(content, str)):
        return ""
    texts = []
    for block in content:
        if type(block) is dict or isinstance(block, Mapping):
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str):
                texts.append(text)
    joined = texts[0] if len(texts) == 1 else "\n".join(texts)
    return join_surrogate_pairs(joined)


def _is_user_source(source: Any) -> bool:
    return isinstance(source, Mapping) and source.get("kind") == "user"
