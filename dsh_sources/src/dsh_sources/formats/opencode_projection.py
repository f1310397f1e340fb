"""What an OpenCode session shows: its facts and the messages of its current conversation.

A session is a row of `session` (a child session, one with a `parent_id`, runs a subagent's
task and is not listed); its messages are rows of `message` in (time_created, id) order, each
with its parts (rows of `part`, in id order). Title and cwd are the session row's `title` and
`directory`. The conversation is what OpenCode keeps of it: going back from the newest message,
it stops at the user message holding a `compaction` part whose summary reply (an assistant
message with `summary: true`, finished, without error) exists; that summary becomes a checkpoint
standing for what came before, and a compaction part's `tail_start_id` keeps the messages from
that one on, placed after the summary. Shown: the user's text parts that OpenCode did not add
itself (`synthetic`) or leave out (`ignored`), and the assistant's text parts; never reasoning,
tool calls and results, files, agents, subtasks, steps, snapshots, patches, retries or the
compaction parts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.sources import SourceMessage
from dsh_sources.transcript import Facts, Said, absolute_cwd, one_line, prompt_title

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue


@dataclass(frozen=True)
class SessionInfo:
    """A session as OpenCode keeps it: the fields a listing shows (times in milliseconds)."""

    id: str
    parent: str | None
    directory: str | None
    title: str | None
    created: int
    updated: int

    @classmethod
    def of(
        cls, sid: str, parent: object, directory: object, title: object, created: object, updated: object
    ) -> SessionInfo:
        """The session from values as read (a value of the wrong type reads as none; times in ms)."""
        created_at = millis(created) or 0
        return cls(
            id=sid,
            parent=parent if isinstance(parent, str) and parent else None,
            directory=directory if isinstance(directory, str) else None,
            title=title if isinstance(title, str) else None,
            created=created_at,
            updated=millis(updated) or created_at,
        )


@dataclass(frozen=True)
class MessageInfo:
    """A message with its parts: `info` and `parts` as OpenCode's own types hold them (ids aside)."""

    id: str
    created: int
    info: dict[str, JsonValue]
    parts: Sequence[dict[str, JsonValue]]


def mark(*values: object) -> str:
    """A short digest of what says whether a session changed (compared, never read back)."""
    return hashlib.blake2b(repr(values).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def millis(value: object) -> int | None:
    """A time in milliseconds as OpenCode writes it (an integer; a float is cut), or None."""
    return value if type(value) is int else int(value) if type(value) is float else None


def _texts(parts: Sequence[dict[str, JsonValue]], *, typed: bool) -> tuple[str, ...]:
    """The text parts shown (for a user message, `typed`: not those OpenCode added or left out)."""
    out: list[str] = []
    for part in parts:
        text = part.get("text")
        if part.get("type") != "text" or not isinstance(text, str) or not text.strip():
            continue
        if typed and (part.get("synthetic") is True or part.get("ignored") is True):
            continue
        out.append(text)
    return tuple(out)


def _completed_summary(message: MessageInfo) -> str | None:
    """The user message a finished, error-free compaction summary answers, or None."""
    info = message.info
    if info.get("role") != "assistant" or info.get("summary") is not True or not info.get("finish"):
        return None
    parent = info.get("parentID")
    return parent if isinstance(parent, str) and not info.get("error") else None


def current(messages: Sequence[MessageInfo]) -> tuple[list[MessageInfo], MessageInfo | None]:
    """The messages OpenCode keeps of a conversation, oldest first, and the compaction summary among them (if any).

    `messages` are in (time_created, id) order. Walking back from the newest, the user message holding
    a `compaction` part whose summary reply exists ends the walk: it and the newer messages are kept,
    and its `tail_start_id` (when it names an older message) keeps the messages from that one on,
    which go after the summary.
    """
    answered: dict[str, MessageInfo] = {}
    newer: list[MessageInfo] = []
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        summary = answered.get(message.id)
        if summary is not None and message.info.get("role") == "user":
            compaction = next((part for part in message.parts if part.get("type") == "compaction"), None)
            if compaction is not None:
                newer.reverse()
                rest = [item for item in newer if item is not summary]
                return [message, summary, *_tail(messages[:at], compaction.get("tail_start_id")), *rest], summary
        newer.append(message)
        parent = _completed_summary(message)
        if parent is not None:
            answered.setdefault(parent, message)
    newer.reverse()
    return newer, None


def _tail(older: Sequence[MessageInfo], start: JsonValue) -> list[MessageInfo]:
    """The messages from the one named `start` on (none when it names no older message)."""
    if not isinstance(start, str):
        return []
    for at in range(len(older) - 1, -1, -1):
        if older[at].id == start:
            return list(older[at:])
    return []


def project(session: SessionInfo, messages: Sequence[MessageInfo]) -> tuple[Facts, tuple[Said, ...]]:
    """A session's facts and the messages of its current conversation, as dsh shows them."""
    kept, summary = current(messages)
    said: list[Said] = []
    prompt: str | None = None
    for message in messages:  # the first prompt titles a session with none, compacted or not
        texts = _texts(message.parts, typed=True) if message.info.get("role") == "user" else ()
        if texts:
            prompt = "\n".join(texts)
            break
    last = session.created
    for message in kept:
        time = message.info.get("time")
        when = millis(time.get("created")) if isinstance(time, dict) else None
        when = message.created if when is None else when
        last = max(last, when)
        role = message.info.get("role")
        if message is summary:
            texts = _texts(message.parts, typed=False)
            if texts:
                said.append(Said(SourceMessage("user", texts, when, source=COMPACT_CHECKPOINT_SOURCE)))
        elif role == "user":
            texts = _texts(message.parts, typed=True)
            if texts:
                said.append(Said(SourceMessage("user", texts, when)))
        elif role == "assistant":
            texts = _texts(message.parts, typed=False)
            model = message.info.get("modelID")
            if texts:
                said.append(
                    Said(SourceMessage("assistant", texts, when, model=model if isinstance(model, str) else "unknown"))
                )
    title = one_line(session.title) or (prompt_title(prompt) if prompt else None)
    facts = Facts(
        agent_id=session.id,
        cwd=absolute_cwd(session.directory),
        created_at=session.created,
        updated_at=max(session.updated, last),
        title=title,
        messages=len(said),
    )
    return facts, tuple(said)
