"""Codex CLI's rollouts, projected to dsh sessions (the format of the `codex` source).

Where: `[sources.codex] dir`, else `$CODEX_HOME`, else `~/.codex`; rollouts are
`sessions/YYYY/MM/DD/rollout-<timestamp>-<uuid>.jsonl`, and archived ones are under
`archived_sessions/`. Each line is `{"timestamp", "type", "payload"}`; the session's id, cwd and
start are its first `session_meta` (a forked or resumed rollout may carry its parent's history,
meta included, after that line). Subagent rollouts are not sessions of their own.

The conversation is the model-visible history as Codex itself rebuilds it: the `message`
response items, in order (their `event_msg` copies for the UI are left out); a `compacted`
record replaces everything before it with its replacement history (or, in older rollouts, the
prompts kept plus the summary), its summary becoming a checkpoint, or a checkpoint saying the
summary is unreadable when the compaction was remote (encrypted); `thread_rolled_back` drops the
last N user turns. Prompts are what the person typed: developer messages and the context Codex
injects as user messages (AGENTS.md, environment, skills, shell commands) are left out.
Assistant messages of phase `commentary` were shown to the person and count as replies; text of
only whitespace shows nothing and is left out.

A rollout that grew is projected from its new records alone: the stored messages stay as the
history's prefix, and only a rollback past the new records or an older compaction (which keeps
the newest prompts) reads stored ones back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.sources import SourceMessage
from dsh_sources.codex import NAME
from dsh_sources.lines import JsonLines
from dsh_sources.reading import read_whole
from dsh_sources.transcript import (
    Facts,
    LatestTime,
    Reread,
    Said,
    Stored,
    Transcript,
    Update,
    absolute_cwd,
    iso_ms,
    one_line,
    prompt_title,
)

if TYPE_CHECKING:
    from dsh_host.hookspecs import Json, JsonValue

PROJECTION = 2
"""The version of this module's projection rules: raise it when they change (the index reads files again)."""
_ROLLOUT = re.compile(r"rollout-.*[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.jsonl\Z")
_INJECTED = (
    "# agents.md instructions for",
    "<user_instructions>",
    "<environment_context>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagents>",
    "<subagent_notification>",
    "<hook_prompt",
)
"""How the context Codex writes as user messages begins (compared lower-cased)."""
_SUMMARY_LEAD = "another language model started to solve this problem"
"""How the summary message Codex puts in a compacted history begins (lower-cased)."""
KEPT_PROMPT_BYTES = 80_000
"""An older compaction (no replacement history) kept the newest prompts up to about this much text."""
UNREADABLE_SUMMARY = (
    "[Codex compacted the conversation before this point remotely; its summary is encrypted and cannot be read.]"
)


def _turn(message: SourceMessage) -> bool:
    """Whether a person's prompt starts a user turn here (checkpoints do not)."""
    return message.role == "user" and message.source.get("kind") == "user"


def _typed(text: str) -> bool:
    return bool(text.strip()) and not text.lstrip()[:40].lower().startswith(_INJECTED)


def _parts(content: JsonValue, kinds: tuple[str, ...]) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [p["text"] for p in content if type(p) is dict and p.get("type") in kinds and isinstance(p.get("text"), str)]


def _message(payload: dict[str, JsonValue], time: int, model: str) -> SourceMessage | None:
    """A `message` response item as a history item, or None when it shows nothing typed or said."""
    role = payload.get("role")
    if role == "user":
        texts = tuple(text for text in _parts(payload.get("content"), ("input_text",)) if _typed(text))
        return SourceMessage("user", texts, time) if texts else None
    if role == "assistant":
        # a part of only whitespace shows nothing: a reply of only such parts is no message
        texts = tuple(text for text in _parts(payload.get("content"), ("output_text", "input_text")) if text.strip())
        return SourceMessage("assistant", texts, time, model=model) if texts else None
    return None


def _checkpoint(text: str, time: int) -> SourceMessage:
    return SourceMessage("user", (text,), time, source=COMPACT_CHECKPOINT_SOURCE)


class _History:
    """The rebuilt history: the first `base` stored messages, then `items` read now."""

    def __init__(self, stored: Stored, base: int) -> None:
        self._stored = stored
        self.base = base
        self.items: list[SourceMessage] = []

    def _newest_first(self) -> Iterator[SourceMessage]:
        yield from reversed(self.items)
        stop = self.base
        while stop > 0:
            start = max(0, stop - 256)
            yield from (said.message for said in reversed(self._stored.messages(start, stop)))
            stop = start

    def compact(self, payload: dict[str, JsonValue], time: int, model: str) -> None:
        """Replace the history as a `compacted` record does."""
        message = payload.get("message")
        summary = message if isinstance(message, str) else ""
        replacement = payload.get("replacement_history")
        if not isinstance(replacement, list):
            kept, budget = [], KEPT_PROMPT_BYTES
            for item in self._newest_first():
                if not _turn(item):
                    continue
                size = sum(len(text.encode("utf-8", "surrogatepass")) for text in item.texts)
                if size > budget:
                    break
                kept.append(item)
                budget -= size
            kept.reverse()
            self.base, self.items = 0, [*kept, _checkpoint(summary if summary.strip() else UNREADABLE_SUMMARY, time)]
            return
        out: list[SourceMessage] = []
        placed = encrypted = False
        for entry in replacement:
            if type(entry) is not dict:
                continue
            kind = entry.get("type")
            if kind in ("compaction", "compaction_summary"):
                encrypted = True
                continue
            if kind != "message":
                continue
            if entry.get("role") == "user":
                joined = "\n".join(_parts(entry.get("content"), ("input_text",)))
                if joined.lstrip().lower().startswith(_SUMMARY_LEAD) or (summary.strip() and summary.strip() in joined):
                    out.append(_checkpoint(summary if summary.strip() else joined, time))
                    placed = True
                    continue
            said = _message(entry, time, model)
            if said is not None:
                out.append(said)
        if not placed:
            readable = summary.strip() and not encrypted
            out.append(_checkpoint(summary if readable else UNREADABLE_SUMMARY, time))
        self.base, self.items = 0, out

    def roll_back(self, turns: JsonValue) -> None:
        """Drop the last `turns` user turns (all of them when there are fewer)."""
        if type(turns) is not int or turns <= 0:
            return
        starts = [index for index, item in enumerate(self.items) if _turn(item)]
        if len(starts) >= turns:
            del self.items[starts[-turns] :]
            return
        if starts and self.base == 0:
            del self.items[starts[0] :]
            return
        older = self._stored.turn_starts(self.base, turns - len(starts)) if self.base else []
        if older:
            self.base, self.items = older[-1], []
        elif starts:
            del self.items[starts[0] :]


def _subagent(source: JsonValue) -> bool:
    return isinstance(source, dict) and any(key in source for key in ("subagent", "sub_agent", "SubAgent"))


class _Projector:
    """A Codex rollout's records projected, from its first byte or from the stored state."""

    def __init__(self, state: Json | None, stored: Stored) -> None:
        st: Json = state or {}
        if state is not None and st.get("id") is None and not st.get("none"):
            raise Reread  # no session_meta yet: what came before it is not stored
        self._none: bool = st.get("none", False)
        self._id: str | None = st.get("id")
        self._cwd: str | None = st.get("cwd")
        self._created: int | None = st.get("created")
        self._latest = LatestTime(st.get("updated"))
        self._title: str | None = st.get("title")
        self._prompt: str | None = st.get("prompt")
        self._model: str = st.get("model", "unknown")
        self._history = _History(stored, st.get("count", 0))

    def feed(self, record: dict[str, JsonValue]) -> None:
        if self._none:
            return
        stamp = record.get("timestamp")
        self._latest.see(stamp)
        kind, payload = record.get("type"), record.get("payload")
        if type(payload) is not dict:
            return
        history = self._history
        if kind == "session_meta":
            if self._id is None:
                meta_id = payload.get("id")
                if not isinstance(meta_id, str) or not meta_id or _subagent(payload.get("source")):
                    self._none = True
                    return
                self._id, self._cwd = meta_id, absolute_cwd(payload.get("cwd"))
                self._created = iso_ms(payload.get("timestamp")) or iso_ms(stamp)
        elif kind == "response_item":
            if payload.get("type") == "message":
                message = _message(payload, self._now(stamp), self._model)
                if message is not None:
                    history.items.append(message)
                    if self._prompt is None and _turn(message):
                        self._prompt = "\n".join(message.texts)
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                self._model = model
        elif kind == "compacted":
            history.compact(payload, self._now(stamp), self._model)
        elif kind == "event_msg":
            event = payload.get("type")
            if event == "thread_rolled_back":
                history.roll_back(payload.get("num_turns"))
            elif event == "thread_name_updated":
                name = payload.get("thread_name")
                if isinstance(name, str) and name.strip():
                    self._title = name

    def _now(self, stamp: JsonValue) -> int:
        """A record's time: its own timestamp, else the latest one so far (0: none yet)."""
        time = iso_ms(stamp)
        return time if time is not None else (self._latest.ms() or 0)

    def finish(self) -> Update:
        updated = self._latest.ms()
        history = self._history
        count = history.base + len(history.items)
        state: Json = {
            "none": self._none,
            "id": self._id,
            "cwd": self._cwd,
            "created": self._created,
            "updated": updated,
            "title": self._title,
            "prompt": self._prompt,
            "model": self._model,
            "count": 0 if self._none else count,
        }
        if self._none or self._id is None:
            return Update(state, None, 0, (), None)
        created_at = self._created if self._created is not None else (updated or 0)
        facts = Facts(
            agent_id=self._id,
            cwd=self._cwd,
            created_at=created_at,
            updated_at=updated if updated is not None else created_at,
            title=one_line(self._title or (prompt_title(self._prompt) if self._prompt else None)),
            messages=count,
        )
        return Update(state, facts, history.base, tuple(Said(item) for item in history.items))


def read_rollout(path: str) -> Transcript | None:
    """A Codex rollout projected whole, or None when it holds no session of its own (OSError if unreadable)."""
    return read_whole(CodexFormat(Path(path).parent), path)


class CodexFormat:
    """Codex CLI's rollouts under `<base>/sessions/` and `<base>/archived_sessions/`."""

    provider = NAME

    def __init__(self, base: Path) -> None:
        self.base = base
        self._titles: tuple[tuple[int, int], dict[str, str]] | None = None

    def files(self) -> Iterator[str]:
        """Every `rollout-*-<uuid>.jsonl` under the two folders (a missing folder holds none)."""
        for folder in ("sessions", "archived_sessions"):
            for root, dirs, names in os.walk(self.base / folder):
                dirs.sort()
                for name in sorted(names):
                    if _ROLLOUT.match(name):
                        yield os.path.join(root, name)

    def locate(self, agent_id: str) -> list[str]:
        """The rollouts whose name ends with `agent_id` (a rollout's file name carries its thread id)."""
        if not agent_id or "/" in agent_id or "\0" in agent_id:
            return []
        return [path for path in self.files() if path.endswith(f"-{agent_id}.jsonl")]

    def records(self, path: str) -> type[JsonLines]:
        """A record a line."""
        return JsonLines

    def projector(self, path: str, state: Json | None, stored: Stored) -> _Projector:
        return _Projector(state, stored)

    def titles(self) -> Mapping[str, str]:
        """Thread names from `session_index.jsonl` (the latest line for an id wins), re-read when it changes."""
        path = self.base / "session_index.jsonl"
        try:
            info = path.stat()
        except OSError:
            return {}
        signature = (info.st_size, info.st_mtime_ns)
        if self._titles is not None and self._titles[0] == signature:
            return self._titles[1]
        names: dict[str, str] = {}
        try:
            with open(path, "rb") as file:
                for record in JsonLines(file):
                    sid, name = record.get("id"), record.get("thread_name")
                    if isinstance(sid, str) and isinstance(name, str) and name.strip():
                        names[sid] = " ".join(name.split())
        except OSError:
            return {}
        self._titles = (signature, names)
        return names
