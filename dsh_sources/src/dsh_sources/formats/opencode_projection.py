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
import json
from collections.abc import Callable, Iterable, Sequence
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


def json_object(text: object) -> dict[str, JsonValue] | None:
    """A stored JSON text (str or bytes) as the object it holds, or None when it holds none."""
    if not isinstance(text, (str, bytes)):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if type(value) is dict else None


def millis(value: object) -> int | None:
    """A time in milliseconds as OpenCode writes it (an integer; a float is cut), or None."""
    return value if type(value) is int else int(value) if type(value) is float else None


def created_ms(info: dict[str, JsonValue]) -> int | None:
    """A message info's `time.created` in milliseconds, or None."""
    time = info.get("time")
    return millis(time.get("created")) if isinstance(time, dict) else None


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


@dataclass(frozen=True, slots=True)
class _Kept:
    """What the projection keeps of a message: the texts it shows and what decides a compaction (small)."""

    id: str
    when: int
    role: JsonValue
    texts: tuple[str, ...]
    """A user message's typed texts, an assistant's texts."""
    model: str
    answers: str | None
    """The user message it answers as a finished, error-free compaction summary."""
    compaction: bool
    """A user message holding a `compaction` part."""
    tail: JsonValue
    """Its first compaction part's `tail_start_id`."""

    @classmethod
    def of(cls, message: MessageInfo) -> _Kept:
        info = message.info
        role = info.get("role")
        when = created_ms(info)
        compaction = next((part for part in message.parts if part.get("type") == "compaction"), None)
        model = info.get("modelID")
        parent = info.get("parentID")
        finished = info.get("summary") is True and info.get("finish") and not info.get("error")
        return cls(
            id=message.id,
            when=message.created if when is None else when,
            role=role,
            texts=_texts(message.parts, typed=role == "user") if role in ("user", "assistant") else (),
            model=model if isinstance(model, str) else "unknown",
            answers=parent if role == "assistant" and finished and isinstance(parent, str) else None,
            compaction=role == "user" and compaction is not None,
            tail=None if compaction is None else compaction.get("tail_start_id"),
        )


class _Reread(Exception):
    """A compaction's tail names a message an earlier compaction let go: the session is read again, keeping all."""


class _Conversation:
    """The conversation OpenCode keeps of a session, built a message at a time, oldest first.

    The newest user message holding a `compaction` part that a newer finished summary answers is
    the cut, and the newest such summary its checkpoint. Messages only add answers, so the cut
    only ever moves to a newer message: what is older than it and than its tail is let go as
    soon as a cut is known (unless `keep_all`). Only a later compaction whose tail names a
    message let go needs it back (`_Reread`); OpenCode takes a tail from the conversation it
    keeps, so its own sessions never do.
    """

    def __init__(self, *, keep_all: bool) -> None:
        self.keep_all = keep_all
        self.held: list[_Kept] = []
        self.cut: int | None = None
        """The cut's user message, an index of `held`."""
        self.tail = 0
        """Where the cut's tail starts in `held` (the cut's own index when it has none)."""
        self.summary: _Kept | None = None
        self.dropped = False
        self.prompt: str | None = None
        """The first prompt (it titles a session with none, compacted or not)."""

    def add(self, message: _Kept) -> None:
        if self.prompt is None and message.role == "user" and message.texts:
            self.prompt = "\n".join(message.texts)
        self.held.append(message)
        if message.answers is None:
            return
        if self.cut is not None and self.held[self.cut].id == message.answers:
            self.summary = message  # the newest summary of a compaction is its checkpoint
            return
        for at in range(len(self.held) - 2, -1 if self.cut is None else self.cut, -1):
            if self.held[at].id == message.answers:
                if self.held[at].compaction:
                    self._cut(at, message)
                return

    def _cut(self, at: int, summary: _Kept) -> None:
        tail = self.held[at].tail
        start = at
        if isinstance(tail, str):
            start = next((older for older in range(at - 1, -1, -1) if self.held[older].id == tail), at)
            if start == at and self.dropped:
                raise _Reread
        if not self.keep_all and start > 0:
            del self.held[:start]
            self.dropped = True
            at, start = at - start, 0
        self.cut, self.tail, self.summary = at, start, summary

    def kept(self) -> list[_Kept]:
        """The messages kept, oldest first: the cut, its summary, its tail, then the newer ones."""
        if self.cut is None or self.summary is None:
            return self.held
        newer = [message for message in self.held[self.cut + 1 :] if message is not self.summary]
        return [self.held[self.cut], self.summary, *self.held[self.tail : self.cut], *newer]


def _conversation(messages: Callable[[], Iterable[MessageInfo]], *, keep_all: bool = False) -> _Conversation:
    conversation = _Conversation(keep_all=keep_all)
    try:
        for message in messages():
            conversation.add(_Kept.of(message))
    except _Reread:
        return _conversation(messages, keep_all=True)
    return conversation


def project(session: SessionInfo, messages: Callable[[], Iterable[MessageInfo]]) -> tuple[Facts, tuple[Said, ...]]:
    """A session's facts and the messages of its current conversation, as dsh shows them.

    `messages()` reads the session's messages in (time_created, id) order, one at a time: only
    what the conversation OpenCode keeps shows is held, so memory follows that conversation and
    the largest message, not the session's length. It is called a second time only for a
    compaction whose tail names a message an earlier compaction cut (never in a session OpenCode
    wrote).
    """
    conversation = _conversation(messages)
    said: list[Said] = []
    last = session.created
    for message in conversation.kept():
        last = max(last, message.when)
        if not message.texts:
            continue
        if message is conversation.summary:
            said.append(Said(SourceMessage("user", message.texts, message.when, source=COMPACT_CHECKPOINT_SOURCE)))
        elif message.role == "user":
            said.append(Said(SourceMessage("user", message.texts, message.when)))
        elif message.role == "assistant":
            said.append(Said(SourceMessage("assistant", message.texts, message.when, model=message.model)))
    prompt = conversation.prompt
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
