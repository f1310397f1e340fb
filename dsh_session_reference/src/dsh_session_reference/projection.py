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
from dsh_host.text import join_surrogate_pairs
from dsh_retention import utf8_length

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
    """A referenced session reduced to what the model may see, before any byte budget.

    The conversation is kept as columns, each message's role and text plus the indexes of the
    compaction checkpoints, rather than as a record per message: a long session projects
    thousands of messages of which retention looks at the few hundred it keeps, and needs of
    the others only their number and their total size (`text_bytes`, the UTF-8 size of all
    texts as JavaScript counts it). `messages` gives the records; `of` builds a source from them.
    """

    session_id: str
    cwd: str | None
    captured_through_seq: int | None
    roles: tuple[Role, ...]
    texts: tuple[str, ...]
    checkpoints: tuple[int, ...]
    text_bytes: int

    @classmethod
    def of(
        cls,
        session_id: str,
        cwd: str | None,
        captured_through_seq: int | None,
        messages: Iterable[ProjectedMessage],
    ) -> ProjectedSource:
        """A source holding ``messages`` (texts as given: surrogate pairs are not joined here)."""
        messages = tuple(messages)
        texts = tuple(message.text for message in messages)
        return cls(
            session_id,
            cwd,
            captured_through_seq,
            tuple(message.role for message in messages),
            texts,
            tuple(index for index, message in enumerate(messages) if message.checkpoint),
            utf8_length("".join(texts)),
        )

    @property
    def messages(self) -> tuple[ProjectedMessage, ...]:
        """The conversation as one record per message."""
        checkpoints = set(self.checkpoints)
        return tuple(
            ProjectedMessage(role, text, index in checkpoints)
            for index, (role, text) in enumerate(zip(self.roles, self.texts, strict=True))
        )

    @property
    def compacted(self) -> bool:
        """Whether the surface holds a compaction checkpoint."""
        return bool(self.checkpoints)


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
    roles: list[Role] = []
    kept: list[str] = []
    checkpoints: list[int] = []
    add_role, add_text = roles.append, kept.append
    for kind, source_kind, source_plugin, text in texts:
        if not text:
            continue
        if kind == "assistant/message":
            add_role("assistant")
        elif kind == "user/message":
            if source_kind != "user":
                if source_kind != _CHECKPOINT_KIND or source_plugin != _CHECKPOINT_PLUGIN:
                    continue
                checkpoints.append(len(kept))
            add_role("user")
        elif kind == "steering/message" and source_kind == "user":
            # Only a user/message can be a checkpoint; compaction's steering is plugin noise.
            add_role("user")
        else:
            continue
        add_text(text)
    joined = "".join(kept)
    if joined.isascii():
        size = len(joined)
    else:
        # A surrogate pair spelled as two code points is one character in JavaScript: such
        # pairs are joined so byte counts and cuts downstream match the reference. Strict UTF-8
        # refuses any surrogate, so one encoding of the whole conversation both sizes it and
        # spares the per-message check when (as usual) there is none.
        try:
            size = len(joined.encode("utf-8"))
        except UnicodeEncodeError:
            kept = [join_surrogate_pairs(text) for text in kept]
            size = utf8_length("".join(kept))
    return ProjectedSource(
        session.id, session.cwd, captured_through_seq, tuple(roles), tuple(kept), tuple(checkpoints), size
    )
