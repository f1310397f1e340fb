"""Gemini CLI session files written as its chat recorder writes them (chatRecordingService.ts).

`GeminiChat` records a session as v0.39+ does: a metadata line, then one JSON line per record
appended (a message re-appended under its id when it changes, `$set` after every message,
`$rewindTo`, and since v0.44 `$set.messages` whenever the history is replaced). `legacy()` gives
the same session as the single JSON object v0.38 and older rewrote whole.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

from tests.dsh_sources.builders import BASE_MS, iso

ROOT = "/work/gemini-project"
ACK = "Got it. Thanks for the additional context!"


def project_hash(root: str) -> str:
    """The project id Gemini used before v0.29, and still writes as `projectHash`."""
    return hashlib.sha256(root.encode()).hexdigest()


def slug_folder(base: Path, root: str, slug: str, *, marker: bool = True, registry: bool = False) -> Path:
    """`<base>/tmp/<slug>`, with its `.project_root` marker and/or its `projects.json` entry."""
    folder = base / "tmp" / slug
    folder.mkdir(parents=True, exist_ok=True)
    if marker:
        (folder / ".project_root").write_text(root, encoding="utf-8")
    if registry:
        path = base / "projects.json"
        data = json.loads(path.read_text()) if path.exists() else {"projects": {}}
        data["projects"][root] = slug
        path.write_text(json.dumps(data, indent=2))
    return folder


class GeminiChat:
    """One session as Gemini CLI records it; `lines()` the JSONL file, `legacy()` the old JSON file."""

    def __init__(
        self, session_id: str | None = None, *, root: str = ROOT, kind: str | None = None, at: int = BASE_MS
    ) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self.root = root
        self.clock = self.started = at
        self.meta: dict[str, Any] = {
            "sessionId": self.session_id,
            "projectHash": project_hash(root),
            "startTime": iso(at),
            "lastUpdated": iso(at),
        }
        if kind is not None:
            self.meta["kind"] = kind
        self.records: list[dict[str, Any]] = [dict(self.meta)]
        self.messages: dict[str, dict[str, Any]] = {}

    def _tick(self) -> str:
        self.clock += 1000
        return iso(self.clock)

    def _push(self, message: dict[str, Any]) -> str:
        self.records.append(message)
        self.messages[message["id"]] = message
        self._set(lastUpdated=iso(self.clock))
        return message["id"]

    def _set(self, **changes: Any) -> None:
        self.records.append({"$set": changes})
        self.meta.update({key: value for key, value in changes.items() if key != "messages"})

    def _message(self, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
        return {"id": str(uuid.uuid4()), "timestamp": self._tick(), "type": kind, "content": content, **extra}

    def _context(self) -> dict[str, Any]:
        """The context Gemini injects as a user message (its environment)."""
        return self._message("user", [{"text": "<session_context>\nOS: linux\n</session_context>"}])

    def user(self, text: str, *, display: str | None = None) -> str:
        """A typed prompt (sent as parts; `display` what was typed when it differs, e.g. an @file expansion)."""
        extra = {} if display is None else {"displayContent": [{"text": display}]}
        return self._push(self._message("user", [{"text": text}], **extra))

    def gemini(self, text: str, *, thought: str | None = None, model: str = "gemini-2.5-pro") -> str:
        """A reply as recorded: `content` the response text, thoughts beside it."""
        thoughts = (
            [] if thought is None else [{"subject": "Plan", "description": thought, "timestamp": iso(self.clock)}]
        )
        return self._push(self._message("gemini", text, thoughts=thoughts, tokens=None, model=model))

    def tool_call(self, name: str = "read_file", output: str = "file body") -> str:
        """A reply of only a tool call, re-appended under its id once the call completes; its response turn."""
        call = {"id": f"call-{uuid.uuid4().hex[:8]}", "name": name, "args": {"path": "a.py"}, "status": "executing"}
        message = self._message("gemini", "", toolCalls=[call], thoughts=[], model="gemini-2.5-pro")
        self._push(message)
        done = {**message, "toolCalls": [{**call, "status": "success", "result": [{"text": output}]}]}
        self._push(done)
        response = {"functionResponse": {"id": call["id"], "name": name, "response": {"output": output}}}
        self._push(self._message("user", [response]))
        return message["id"]

    def tokens(self, message_id: str) -> None:
        """The token counts of a reply arriving after it: the reply re-appended whole under its id."""
        self._push({**self.messages[message_id], "tokens": {"input": 10, "output": 5, "cached": 0, "total": 15}})

    def again(self, message_id: str, text: str) -> None:
        """The message of `message_id` appended again with new text (replacing it where it stands)."""
        message = self.messages.get(message_id) or next(r for r in self.records if r.get("id") == message_id)
        self._push({**message, "content": text if message["type"] == "gemini" else [{"text": text}]})

    def info(self, text: str, kind: str = "info") -> str:
        return self._push(self._message(kind, text))

    def summary(self, text: str) -> None:
        self._set(summary=text)

    def rewind(self, message_id: str) -> None:
        """/rewind to before `message_id` (v0.44+ then replaces the history with what is left)."""
        self.records.append({"$rewindTo": message_id})
        ids = list(self.messages)
        if message_id in ids:
            for dropped in ids[ids.index(message_id) :]:
                del self.messages[dropped]
        else:
            self.messages.clear()

    def replace_history(self, history: list[dict[str, Any]]) -> None:
        """`$set.messages`: the whole history replaced (v0.44+)."""
        self.messages = {message["id"]: message for message in history}
        self._set(messages=history, lastUpdated=iso(self.clock))

    def session_context(self) -> str:
        """The context turn every v0.44+ session starts with, recorded and then set as the history."""
        self._push(self._context())
        self.replace_history(list(self.messages.values()))
        return next(iter(self.messages))

    def compress(self, summary: str, keep: int = 2) -> None:
        """A compression: [context, summary, acknowledgement, the last `keep` turns under new ids] as the history."""
        kept = [
            {**m, "id": str(uuid.uuid4())} for m in list(self.messages.values())[-keep:] if keep and m["type"] != "info"
        ]
        context = self._context()
        snapshot = self._message("user", [{"text": f"<state_snapshot>\n{summary}\n</state_snapshot>"}])
        ack = self._message("gemini", [{"text": ACK}])
        new = [context, snapshot, ack, *kept]
        for message in new:
            self._push(message)
        self.replace_history(new)

    def raw(self, record: Any) -> None:
        self.records.append(record)

    def lines(self) -> list[str]:
        return [json.dumps(record) + "\n" for record in self.records]

    def legacy(self) -> str:
        """The session as v0.38 and older wrote it: one pretty-printed JSON object."""
        record = {
            "sessionId": self.session_id,
            "projectHash": self.meta["projectHash"],
            "startTime": self.meta["startTime"],
            "lastUpdated": self.meta["lastUpdated"],
            "messages": list(self.messages.values()),
        }
        for key in ("summary", "kind"):
            if key in self.meta:
                record[key] = self.meta[key]
        return json.dumps(record, indent=2)

    def file_name(self, suffix: str = ".jsonl") -> str:
        stamp = iso(self.started)[:16].replace(":", "-")
        return f"session-{stamp}-{self.session_id[:8]}{suffix}"

    def write(self, project: Path, *, legacy: bool = False, name: str | None = None) -> Path:
        """Write the session into `<project>/chats/` (JSONL, or `legacy` JSON) and return its path."""
        chats = project / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        path = chats / (name or self.file_name(".json" if legacy else ".jsonl"))
        path.write_text(self.legacy() if legacy else "".join(self.lines()), encoding="utf-8")
        return path
