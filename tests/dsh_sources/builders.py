"""Test-side builders of the two agents' session files, in the formats they write today.

`ClaudeTranscript` writes Claude Code 2.x transcripts: chain records linked by `parentUuid`, one
record per content block of a streamed reply (sharing `message.id`), tool results as user
records, compaction as a `compact_boundary` system record (no parent) followed by the compact
summary, rewinds as a new branch from an earlier record, sidechain records, meta records and
command wrappers, title and summary records. `CodexRollout` writes Codex CLI rollouts:
`{"timestamp", "type", "payload"}` lines with `session_meta`, `turn_context`, `response_item`
(messages, reasoning, function calls) and their `event_msg` copies, `compacted` records (local,
legacy and remote/encrypted), rollbacks and thread names. Nothing here is copied from a real
session: the builders make every byte.
"""

from __future__ import annotations

import json
import uuid as uuids
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def dumps(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def claude_project_dir(base: Path, cwd: str) -> Path:
    """`<base>/projects/<cwd with every non-alphanumeric character as '-'>`."""
    return base / "projects" / "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in cwd)


@dataclass
class ClaudeTranscript:
    """A Claude Code session being written, record by record."""

    cwd: str = "/work/project"
    session_id: str = field(default_factory=lambda: str(uuids.uuid4()))
    version: str = "2.1.3"
    records: list[dict[str, Any]] = field(default_factory=list)
    head: str | None = None
    clock: int = BASE_MS
    _side_head: str | None = None

    def _base(self, kind: str, *, parent: Any = "head", sidechain: bool = False) -> dict[str, Any]:
        self.clock += 1000
        return {
            "parentUuid": self.head if parent == "head" else parent,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": "main",
            "type": kind,
        }

    def _add(self, record: dict[str, Any]) -> str:
        uid = str(uuids.uuid4())
        record["uuid"] = uid
        record["timestamp"] = iso(self.clock)
        self.records.append(record)
        if record["isSidechain"]:
            self._side_head = uid  # a subagent's records (2.0.x, in the same file) chain among themselves
        else:
            self.head = uid
        return uid

    def user(self, content: Any, *, sidechain: bool = False, **flags: Any) -> str:
        """A user record: a typed prompt (str or text blocks), or whatever `content` says."""
        record = self._base("user", sidechain=sidechain, parent=self._side_head if sidechain else "head")
        record["message"] = {"role": "user", "content": content}
        record.update(flags)
        return self._add(record)

    def meta(self, text: str) -> str:
        """An injected user record (`isMeta`), e.g. a caveat Claude Code writes."""
        return self.user(text, isMeta=True)

    def command(self, name: str, args: str = "") -> str:
        """A slash command the person ran, as Claude Code wraps it."""
        text = (
            f"<command-name>/{name}</command-name>\n<command-message>{name}</command-message>\n"
            f"<command-args>{args}</command-args>"
        )
        return self.user(text)

    def reply(
        self, *blocks: tuple[str, str], model: str = "claude-sonnet-4-5-20250929", sidechain: bool = False
    ) -> list[str]:
        """One streamed reply: a record per content block (`thinking`, `text`, `tool_use`), one `message.id`."""
        message_id = "msg_" + uuids.uuid4().hex[:24]
        request_id = "req_" + uuids.uuid4().hex[:24]
        out = []
        for kind, value in blocks:
            if kind == "thinking":
                block: dict[str, Any] = {"type": "thinking", "thinking": value, "signature": "sig" + value[:4]}
            elif kind == "text":
                block = {"type": "text", "text": value}
            elif kind == "tool_use":
                block = {"type": "tool_use", "id": value, "name": "Bash", "input": {"command": "ls"}}
            else:
                raise ValueError(kind)
            record = self._base("assistant", sidechain=sidechain, parent=self._side_head if sidechain else "head")
            record["message"] = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            record["requestId"] = request_id
            out.append(self._add(record))
        return out

    def tool_result(self, tool_use_id: str, output: str) -> str:
        content = [{"tool_use_id": tool_use_id, "type": "tool_result", "content": output}]
        return self.user(content, toolUseResult={"stdout": output, "stderr": "", "interrupted": False})

    def compact(self, summary: str, trigger: str = "manual") -> str:
        """`/compact`: the boundary (no parent; `logicalParentUuid` the old head) and the summary."""
        boundary = self._base("system", parent=None)
        boundary.update(
            {
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "level": "info",
                "logicalParentUuid": self.head,
                "compactMetadata": {"trigger": trigger, "preTokens": 12345},
            }
        )
        self._add(boundary)
        return self.user(
            "This session is being continued from a previous conversation that ran out of context. "
            "The conversation is summarized below:\n" + summary,
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
        )

    def progress(self) -> str:
        record = self._base("progress")
        record["data"] = {"type": "hook_progress", "hookEvent": "PostToolUse"}
        return self._add(record)

    def rewind(self, to: str | None) -> None:
        """Continue from an earlier record (editing a prompt, or a rewind): a new branch starts there."""
        self.head = to

    def summary(self, text: str) -> None:
        self.records.append({"type": "summary", "summary": text, "leafUuid": self.head})

    def custom_title(self, title: str) -> None:
        self.records.append({"type": "custom-title", "customTitle": title, "sessionId": self.session_id})

    def ai_title(self, title: str) -> None:
        self.records.append({"type": "ai-title", "aiTitle": title, "sessionId": self.session_id})

    def snapshot_record(self) -> None:
        self.records.append({"type": "file-history-snapshot", "messageId": str(uuids.uuid4()), "snapshot": {}})

    def lines(self) -> list[str]:
        return [dumps(record) + "\n" for record in self.records]

    def write(self, base: Path, *, cut_last: bool = False, extra: list[str] | None = None) -> Path:
        """Write `<base>/projects/<escaped cwd>/<session id>.jsonl` (the last line cut mid-write if asked)."""
        folder = claude_project_dir(base, self.cwd)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.session_id}.jsonl"
        lines = self.lines() + list(extra or [])
        if cut_last:
            lines[-1] = lines[-1][: len(lines[-1]) // 2]
        path.write_text("".join(lines), encoding="utf-8", errors="surrogatepass")
        return path


@dataclass
class CodexRollout:
    """A Codex CLI rollout being written, line by line."""

    cwd: str = "/work/project"
    session_id: str = field(default_factory=lambda: str(uuids.uuid4()))
    cli_version: str = "0.125.0"
    lines_: list[dict[str, Any]] = field(default_factory=list)
    clock: int = BASE_MS

    def _line(self, kind: str, payload: dict[str, Any]) -> None:
        self.clock += 1000
        self.lines_.append({"timestamp": iso(self.clock), "type": kind, "payload": payload})

    def meta(self, *, session_id: str | None = None, forked_from: str | None = None, source: Any = "cli") -> None:
        payload: dict[str, Any] = {
            "id": session_id or self.session_id,
            "timestamp": iso(self.clock),
            "cwd": self.cwd,
            "originator": "codex_cli_rs",
            "cli_version": self.cli_version,
            "source": source,
            "model_provider": "openai",
            "base_instructions": {"text": "You are Codex, a coding agent."},
        }
        if forked_from is not None:
            payload["forked_from_id"] = forked_from
        self._line("session_meta", {**payload, "git": {"branch": "main", "commit_hash": "abc123"}})

    def turn_context(self, model: str = "gpt-5.1-codex") -> None:
        self._line(
            "turn_context",
            {
                "cwd": self.cwd,
                "approval_policy": "on-request",
                "sandbox_policy": {"type": "workspace-write"},
                "model": model,
                "summary": "auto",
            },
        )

    def context(self) -> None:
        """What Codex injects at a session's start: developer instructions, AGENTS.md, environment."""
        self._line(
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [
                    {"type": "input_text", "text": "<permissions instructions>sandboxed</permissions instructions>"}
                ],
            },
        )
        self._line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"# AGENTS.md instructions for {self.cwd}\n\n<INSTRUCTIONS>\nbe terse\n</INSTRUCTIONS>",
                    }
                ],
            },
        )
        self._line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n</environment_context>",
                    }
                ],
            },
        )

    def user(self, text: str) -> None:
        """A typed prompt: the model-visible message, then its UI copy."""
        self._line(
            "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        )
        self._line("event_msg", {"type": "user_message", "message": text, "images": []})

    def assistant(self, text: str, *, phase: str | None = "final_answer") -> None:
        payload: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }
        if phase is not None:
            payload["phase"] = phase
        self._line("event_msg", {"type": "agent_message", "message": text})
        self._line("response_item", payload)

    def tool_call(self, name: str = "shell", output: str = "total 0") -> None:
        self._line(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Listing files**"}],
                "content": None,
                "encrypted_content": "gAAAA" + "x" * 40,
            },
        )
        self._line(
            "response_item",
            {"type": "function_call", "name": name, "arguments": '{"command":["ls"]}', "call_id": "call_1"},
        )
        self._line("response_item", {"type": "function_call_output", "call_id": "call_1", "output": output})

    def token_count(self) -> None:
        self._line(
            "event_msg",
            {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 100}}, "rate_limits": None},
        )

    def compacted(self, summary: str, kept_prompts: list[str]) -> None:
        """A local compaction: the summary, and the history that replaces everything before it."""
        message = (
            "Another language model started to solve this problem and produced a summary of its thinking process.\n"
            + summary
        )
        history: list[dict[str, Any]] = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            for text in kept_prompts
        ]
        history.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": message}]})
        self._line("compacted", {"message": message, "replacement_history": history})
        self._line("event_msg", {"type": "context_compacted"})

    def legacy_compacted(self, summary: str) -> None:
        """A compaction as older Codex versions wrote it: the summary alone."""
        self._line("compacted", {"message": summary})

    def remote_compacted(self, kept_prompts: list[str]) -> None:
        """A remote compaction: no readable summary, an encrypted item in the replacement history."""
        history: list[dict[str, Any]] = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            for text in kept_prompts
        ]
        history.append({"type": "compaction", "encrypted_content": "gAAAAB" + "z" * 64})
        self._line("compacted", {"message": "", "replacement_history": history})

    def rollback(self, turns: int) -> None:
        self._line("event_msg", {"type": "thread_rolled_back", "num_turns": turns})

    def thread_name(self, name: str) -> None:
        self._line("event_msg", {"type": "thread_name_updated", "thread_id": self.session_id, "thread_name": name})

    def raw(self, line: dict[str, Any]) -> None:
        self.lines_.append(line)

    def lines(self) -> list[str]:
        return [dumps(line) + "\n" for line in self.lines_]

    def path_in(self, base: Path, *, archived: bool = False) -> Path:
        stamp = iso(BASE_MS)[:19].replace(":", "-")
        if archived:
            return base / "archived_sessions" / f"rollout-{stamp}-{self.session_id}.jsonl"
        return base / "sessions" / "2026" / "01" / "01" / f"rollout-{stamp}-{self.session_id}.jsonl"

    def write(
        self, base: Path, *, archived: bool = False, cut_last: bool = False, extra: list[str] | None = None
    ) -> Path:
        path = self.path_in(base, archived=archived)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = self.lines() + list(extra or [])
        if cut_last:
            lines[-1] = lines[-1][: len(lines[-1]) // 2]
        path.write_text("".join(lines), encoding="utf-8", errors="surrogatepass")
        return path
