"""A source session's conversation as a dsh log: header, then its surface events from seq 0.

A source projects another agent's session to `SourceConversation`: the messages of its current
conversation, as a reference shows them (typed prompts, checkpoints, assistant text). The log
synthesized from it holds exactly those messages, each a surface event appended in order (a
`user/message` with the message's source, an `assistant/message` with the agent as provider),
so its surface is the whole log and `captured_through_seq` is the last seq. `dsh sessions
show` and `export` print it; `import` makes a dsh copy of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh_host.session.events import Event, SessionHeader, SurfaceText
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue

USER_SOURCE: Mapping[str, str] = {"kind": "user"}
"""The source of a prompt a person typed."""


@dataclass(frozen=True)
class SourceMessage:
    """One message of a source session's current conversation.

    `role` is "user" or "assistant"; `texts` its text blocks, in order (a reply streamed as
    several records is one message of several blocks); `time` milliseconds since the epoch.
    A user message's `source` is `{"kind": "user"}` for a typed prompt, or the compaction
    marker for a checkpoint; an assistant message names the `model` that wrote it.
    """

    role: str
    texts: tuple[str, ...]
    time: int
    source: Mapping[str, str] = field(default_factory=lambda: USER_SOURCE)
    model: str = "unknown"

    def surface_text(self) -> SurfaceText:
        """The message as the synthesized surface holds it as text (its blocks joined by newlines)."""
        text = "\n".join(self.texts)
        if self.role == "user":
            return SurfaceText("user/message", self.source.get("kind"), self.source.get("plugin"), text)
        return SurfaceText("assistant/message", None, None, text)


@dataclass(frozen=True)
class SourceConversation:
    """A source session: its header, its current messages, and the agent as provenance provider.

    Its methods are the reads a source answers for it, all from the same messages.
    """

    header: SessionHeader
    messages: tuple[SourceMessage, ...]
    provider: str

    def _event_data(self) -> list[tuple[str, int, dict[str, JsonValue]]]:
        """(type, time, data) of each message: turns count the prompts, steps the replies within one."""
        out: list[tuple[str, int, dict[str, JsonValue]]] = []
        turn, step = 0, 0
        for message in self.messages:
            content = [{"type": "text", "text": text} for text in message.texts]
            time = max(0, message.time)
            if message.role == "user":
                turn, step = turn + 1, 0
                out.append(("user/message", time, {"content": content, "source": dict(message.source)}))
            else:
                step += 1
                provenance = {"provider": self.provider, "model": message.model}
                data = {"turn": max(turn, 1), "step": step, "content": content, "provenance": provenance}
                out.append(("assistant/message", time, data))
        return out

    def events(self) -> list[Event]:
        """The synthesized log's events: one appended surface event per message, seqs from 0."""
        return [
            Event(kind, seq, time, data_json=_dumps(data), surface_op="append")
            for seq, (kind, time, data) in enumerate(self._event_data())
        ]

    def lines(self) -> list[str]:
        """The synthesized log's event lines (compact JSON), in seq order."""
        return [event.to_line() for event in self.events()]

    def surface(self) -> SurfaceSnapshot:
        """The synthesized log's surface snapshot: every event, in log form."""
        events = [
            {"type": kind, "seq": seq, "time": time, "data": data, "surfaceOp": "append"}
            for seq, (kind, time, data) in enumerate(self._event_data())
        ]
        return SurfaceSnapshot(self.header, len(events) - 1 if events else None, events)

    def texts(self) -> SurfaceTexts:
        """The synthesized surface as text: one `SurfaceText` per message."""
        texts = [message.surface_text() for message in self.messages]
        last = len(texts) - 1
        return SurfaceTexts(self.header, last if last >= 0 else None, texts)


def _dumps(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
