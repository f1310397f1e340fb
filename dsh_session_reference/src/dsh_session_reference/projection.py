"""Project one surface snapshot to the human-readable conversation a reference shows the model.

Only direct human prompts, compaction checkpoints and assistant text survive: plugin-generated
prompts, tool output, injected contexts and reasoning are left out, and a prompt that itself
carried a baked snapshot contributes only its display content, so snapshots never nest. The
text of a node (its display content's text blocks joined with newlines) is the host's
`SurfaceText`, which the store keeps per surface node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, cast

from dsh_compact.marker import COMPACT_CHECKPOINT_SOURCE
from dsh_host import SurfaceText
from dsh_host.log import surface_text
from dsh_host.text import has_surrogate, join_surrogate_pairs

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json

Role = Literal["user", "assistant"]

_CHECKPOINT_KIND = COMPACT_CHECKPOINT_SOURCE["kind"]
_CHECKPOINT_PLUGIN = COMPACT_CHECKPOINT_SOURCE["plugin"]


class SessionHeaderLike(Protocol):
    """The part of a session header a projection reads."""

    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str | None: ...


class ProjectedMessage(NamedTuple):
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
    events: Iterable[Json],
) -> ProjectedSource:
    """Project surface ``events`` (log JSON form, model-history order) of ``session``.

    ``captured_through_seq`` is passed through: it is the seq of the snapshot's last log event
    of any type, which need not be a surface event.
    """
    texts = (surface_text(cast(str, event.get("type")), event.get("data")) for event in events)
    return project_texts(session, captured_through_seq, texts)


def project_texts(
    session: SessionHeaderLike,
    captured_through_seq: int | None,
    texts: Iterable[SurfaceText],
) -> ProjectedSource:
    """Project a surface given as one `SurfaceText` per node (what the query service reads).

    Kept: assistant messages; user messages from the user, and compaction checkpoints (a
    `user/message` whose source is the marker, recognised by its two fields alone); steering
    from the user. Nodes without text contribute nothing.
    """
    rows = texts if isinstance(texts, list) else list(texts)
    # A surrogate pair spelled as two code points is one character in JavaScript: such pairs
    # are joined so byte counts and cuts downstream match the reference. One check of the
    # whole conversation spares the per-message check when (as usual) there is none.
    pairs = has_surrogate("".join([row[3] for row in rows]))
    messages: list[ProjectedMessage] = []
    append = messages.append
    make = ProjectedMessage._make  # builds from one tuple, cheaper than the keyword-aware constructor
    for kind, source_kind, source_plugin, text in rows:
        if not text:
            continue
        if pairs:
            text = join_surrogate_pairs(text)
        if kind == "assistant/message":
            append(make(("assistant", text, False)))
        elif kind == "user/message":
            if source_kind == "user":
                append(make(("user", text, False)))
            elif source_kind == _CHECKPOINT_KIND and source_plugin == _CHECKPOINT_PLUGIN:
                append(make(("user", text, True)))
        elif kind == "steering/message" and source_kind == "user":
            # Only a user/message can be a checkpoint; compaction's steering is plugin noise.
            append(make(("user", text, False)))
    return ProjectedSource(session.id, session.cwd, captured_through_seq, tuple(messages))
