"""The `codex` plugin: Codex CLI's rollouts as read-only dsh sessions.

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
Assistant messages of phase `commentary` were shown to the person and count as replies.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host import Host, hookimpl
from dsh_host.hookspecs import RegisterCompletion, SourceFactory
from dsh_host.sources import SourceMessage
from dsh_sources.lines import JsonLines
from dsh_sources.source import register_source
from dsh_sources.transcript import Transcript, absolute_cwd, iso_ms, prompt_title

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

NAME = "codex"
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


class _Item:
    """One message of the rebuilt history."""

    __slots__ = ("message",)

    def __init__(self, message: SourceMessage) -> None:
        self.message = message

    @property
    def turn(self) -> bool:
        """Whether a person's prompt starts a user turn here (checkpoints do not)."""
        return self.message.role == "user" and self.message.source.get("kind") == "user"


def _typed(text: str) -> bool:
    return bool(text.strip()) and not text.lstrip()[:40].lower().startswith(_INJECTED)


def _parts(content: JsonValue, kinds: tuple[str, ...]) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [p["text"] for p in content if type(p) is dict and p.get("type") in kinds and isinstance(p.get("text"), str)]


def _message(payload: dict[str, JsonValue], time: int, model: str) -> _Item | None:
    """A `message` response item as a history item, or None when it shows nothing typed or said."""
    role = payload.get("role")
    if role == "user":
        texts = tuple(text for text in _parts(payload.get("content"), ("input_text",)) if _typed(text))
        return _Item(SourceMessage("user", texts, time)) if texts else None
    if role == "assistant":
        texts = tuple(text for text in _parts(payload.get("content"), ("output_text", "input_text")) if text)
        return _Item(SourceMessage("assistant", texts, time, model=model)) if texts else None
    return None


def _checkpoint(text: str, time: int) -> _Item:
    return _Item(SourceMessage("user", (text,), time, source=COMPACT_CHECKPOINT_SOURCE))


def _compacted(payload: dict[str, JsonValue], history: list[_Item], time: int, model: str) -> list[_Item]:
    """The history after a `compacted` record."""
    message = payload.get("message")
    summary = message if isinstance(message, str) else ""
    replacement = payload.get("replacement_history")
    if not isinstance(replacement, list):
        kept, budget = [], KEPT_PROMPT_BYTES
        for item in reversed(history):
            size = sum(len(text.encode("utf-8", "surrogatepass")) for text in item.message.texts)
            if not item.turn:
                continue
            if size > budget:
                break
            kept.append(item)
            budget -= size
        kept.reverse()
        return [*kept, _checkpoint(summary if summary.strip() else UNREADABLE_SUMMARY, time)]
    out: list[_Item] = []
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
            texts = _parts(entry.get("content"), ("input_text",))
            joined = "\n".join(texts)
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
    return out


def _rolled_back(history: list[_Item], turns: JsonValue) -> list[_Item]:
    """The history without its last `turns` user turns (all of them when there are fewer)."""
    if type(turns) is not int or turns <= 0:
        return history
    starts = [index for index, item in enumerate(history) if item.turn]
    if not starts:
        return history
    cut = starts[-turns] if turns <= len(starts) else starts[0]
    return history[:cut]


def _subagent(source: JsonValue) -> bool:
    return isinstance(source, dict) and any(key in source for key in ("subagent", "sub_agent", "SubAgent"))


def read_rollout(path: str) -> Transcript | None:
    """A Codex rollout projected, or None when it holds no session of its own (OSError if unreadable)."""
    agent_id: str | None = None
    cwd: str | None = None
    created: int | None = None
    updated: int | None = None
    title: str | None = None
    first_prompt: str | None = None
    model = "unknown"
    history: list[_Item] = []
    with open(path, "rb") as file:
        lines = JsonLines(file)
        for record in lines:
            time = iso_ms(record.get("timestamp"))
            if time is not None:
                updated = time if updated is None else max(updated, time)
            now = time if time is not None else (updated or 0)
            kind, payload = record.get("type"), record.get("payload")
            if type(payload) is not dict:
                continue
            if kind == "session_meta":
                if agent_id is None:
                    meta_id = payload.get("id")
                    if not isinstance(meta_id, str) or not meta_id or _subagent(payload.get("source")):
                        return None
                    agent_id, cwd = meta_id, absolute_cwd(payload.get("cwd"))
                    created = iso_ms(payload.get("timestamp")) or time
            elif kind == "response_item":
                if payload.get("type") == "message":
                    item = _message(payload, now, model)
                    if item is not None:
                        history.append(item)
                        if first_prompt is None and item.turn:
                            first_prompt = "\n".join(item.message.texts)
            elif kind == "turn_context":
                if isinstance(payload.get("model"), str) and payload["model"]:
                    model = payload["model"]
            elif kind == "compacted":
                history = _compacted(payload, history, now, model)
            elif kind == "event_msg":
                event = payload.get("type")
                if event == "thread_rolled_back":
                    history = _rolled_back(history, payload.get("num_turns"))
                elif event == "thread_name_updated":
                    name = payload.get("thread_name")
                    if isinstance(name, str) and name.strip():
                        title = name
    if agent_id is None:
        return None
    created_at = created if created is not None else (updated or 0)
    title = title or (prompt_title(first_prompt) if first_prompt else None)
    return Transcript(
        agent_id=agent_id,
        cwd=cwd,
        created_at=created_at,
        updated_at=updated if updated is not None else created_at,
        title=" ".join(title.split()) if title else None,
        messages=tuple(item.message for item in history),
        skipped=lines.skipped,
        oversized=lines.oversized,
    )


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

    def read(self, path: str) -> Transcript | None:
        return read_rollout(path)

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


@hookimpl
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    """Serve Codex CLI's rollouts as the read-only source `codex`."""
    register_source(register, NAME, CodexFormat, home=("CODEX_HOME", ".codex"))


@hookimpl
def dsh_register_completions(host: Host, register: RegisterCompletion) -> None:
    """Say in the `@` menu while the source's index is still being built."""
    from dsh_sources.source import IndexingNotice

    register(IndexingNotice(host, NAME), None)
