"""Claude Code transcripts, written record by record from byte templates.

The shapes are Claude Code 2.x's: chain records (`user`, `assistant`, `system`, `progress`)
linked by `parentUuid`; a reply streamed as one `assistant` record per content block
(thinking, text, tool use) sharing `message.id`; each tool result a `user` record carrying the
output twice (in the message, and in `toolUseResult`); a `file-history-snapshot` before each
prompt; compaction as a `compact_boundary` system record with no parent followed by an
`isCompactSummary` user record; a rewind as a new branch from an earlier record; `summary` and
`custom-title` metadata records.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import BinaryIO

from bench.corpus.material import Blobs, Clock, Habits, SessionWriter, Texts

RECORD_CAP = 8 * 1024 * 1024
"""No record the writers make reaches this many bytes."""

_COMMON = (
    b'"isSidechain":false,"userType":"external","cwd":"%s","sessionId":"%s","version":"2.1.14","gitBranch":"main",'
)
_PROMPT = (
    b'{"parentUuid":%s,%s"type":"user","message":{"role":"user","content":"%s"},"uuid":"%s","timestamp":"%s",'
    b'"thinkingMetadata":{"level":"high","disabled":false},"permissionMode":"default"}\n'
)
_SUMMARY_PROMPT = (
    b'{"parentUuid":"%s",%s"type":"user","message":{"role":"user","content":"This session is being continued '
    b"from a previous conversation that ran out of context. The conversation is summarized below:\\n%s"
    b'"},"isCompactSummary":true,"isVisibleInTranscriptOnly":true,"uuid":"%s","timestamp":"%s"}\n'
)
_ASSISTANT = (
    b'{"parentUuid":"%s",%s"message":{"model":"claude-opus-4-5-20251101","id":"msg_%s","type":"message",'
    b'"role":"assistant","content":[%s],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,'
    b'"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"standard"}},'
    b'"requestId":"req_%s","type":"assistant","uuid":"%s","timestamp":"%s"}\n'
)
_THINKING = b'{"type":"thinking","thinking":"%s","signature":"%s"}'
_TEXT = b'{"type":"text","text":"%s"}'
_BASH = b'{"type":"tool_use","id":"toolu_%s","name":"Bash","input":{"command":"%s","description":"Search the code"}}'
_READ = b'{"type":"tool_use","id":"toolu_%s","name":"Read","input":{"file_path":"%s"}}'
_EDIT = (
    b'{"type":"tool_use","id":"toolu_%s","name":"Edit","input":{"file_path":"%s","old_string":"return value",'
    b'"new_string":"return value or {}"}}'
)
_READ_RESULT = (
    b'{"parentUuid":"%s",%s"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%s",'
    b'"type":"tool_result","content":"%s"}]},"uuid":"%s","timestamp":"%s","toolUseResult":{"type":"text",'
    b'"file":{"filePath":"%s","content":"%s","numLines":%d,"startLine":1,"totalLines":%d}},'
    b'"sourceToolAssistantUUID":"%s"}\n'
)
_EDIT_RESULT = (
    b'{"parentUuid":"%s",%s"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%s",'
    b'"type":"tool_result","content":"The file %s has been updated. Here is the result of running `cat -n` on a '
    b'snippet of the edited file:\\n%s"}]},"uuid":"%s","timestamp":"%s","toolUseResult":{"filePath":"%s",'
    b'"oldString":"return value","newString":"return value or {}","originalFile":"%s","structuredPatch":'
    b'[{"oldStart":%d,"oldLines":%d,"newStart":%d,"newLines":%d,"lines":%s}],"userModified":false,'
    b'"replaceAll":false},"sourceToolAssistantUUID":"%s"}\n'
)
_RESULT = (
    b'{"parentUuid":"%s",%s"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%s",'
    b'"type":"tool_result","content":"%s","is_error":false}]},"uuid":"%s","timestamp":"%s",'
    b'"toolUseResult":{"stdout":"%s","stderr":"","interrupted":false,"isImage":false},"sourceToolAssistantUUID":"%s"}\n'
)
_PROGRESS = (
    b'{"parentUuid":"%s",%s"type":"progress","data":{"type":"hook_progress","hookEvent":"PostToolUse",'
    b'"hookName":"PostToolUse:Bash","command":"fmt --check"},"parentToolUseID":"toolu_%s","toolUseID":"toolu_%s",'
    b'"uuid":"%s","timestamp":"%s"}\n'
)
_DURATION = (
    b'{"parentUuid":"%s",%s"type":"system","subtype":"turn_duration","durationMs":%d,"isMeta":false,'
    b'"uuid":"%s","timestamp":"%s"}\n'
)
_BOUNDARY = (
    b'{"parentUuid":null,"logicalParentUuid":"%s",%s"type":"system","subtype":"compact_boundary",'
    b'"content":"Conversation compacted","isMeta":false,"level":"info","compactMetadata":{"trigger":"auto",'
    b'"preTokens":%d},"uuid":"%s","timestamp":"%s"}\n'
)
_SNAPSHOT = (
    b'{"type":"file-history-snapshot","messageId":"%s","snapshot":{"messageId":"%s","trackedFileBackups":{},'
    b'"timestamp":"%s"},"isSnapshotUpdate":false}\n'
)
_SUMMARY = b'{"type":"summary","summary":"%s","leafUuid":"%s"}\n'
_TITLE = b'{"type":"custom-title","customTitle":"%s","sessionId":"%s"}\n'
_CHAIN = frozenset({"user", "assistant", "system", "progress", "attachment"})


class ClaudeWriter(SessionWriter):
    """Appends turns of one Claude Code session to `out`, counting the bytes written."""

    def __init__(
        self,
        out: BinaryIO,
        rng: random.Random,
        blobs: Blobs,
        texts: Texts,
        *,
        session_id: bytes,
        cwd: str,
        clock: Clock,
        habits: Habits,
        head: bytes | None = None,
    ) -> None:
        super().__init__(out, rng, blobs, texts, cwd=cwd, clock=clock, habits=habits)
        self.session_id = session_id
        self.common = _COMMON % (self.cwd, session_id)
        self.head = head
        self._turn_parent: bytes | None = None

    def _parent(self) -> bytes:
        return b"null" if self.head is None else b'"%s"' % self.head

    def _assistant(self, block: bytes, message_id: bytes, request_id: bytes) -> None:
        uid = self.ids.uuid()
        rng = self.rng
        self._put(
            _ASSISTANT
            % (
                self.head,
                self.common,
                message_id,
                block,
                rng.randrange(3, 40),
                rng.randrange(0, 4000),
                rng.randrange(10_000, 150_000),
                rng.randrange(20, 900),
                request_id,
                uid,
                self.clock.advance(rng.randrange(200, 4000)),
            )
        )
        self.head = uid

    def turn(self, target: int, extra: str = "") -> None:
        """One prompt, a reply with one to three tool calls, their results, and a closing reply.

        Tool outputs are picked to fit what is left of `target` bytes.
        """
        rng, ids, clock, habits = self.rng, self.ids, self.clock, self.habits
        if self.turns > 2 and self._turn_parent is not None and rng.random() < habits.rewind:
            self.head = self._turn_parent  # the person rewound: the last turn stays in the file, off the chain
        if habits.compact_every and self.written >= self._next_compact:
            self.compact()
            self._next_compact = self.written + habits.compact_every
        self._turn_parent = self.head
        prompt_id = ids.uuid()
        self._put(_SNAPSHOT % (prompt_id, prompt_id, clock.iso()))
        self._put(
            _PROMPT
            % (
                self._parent(),
                self.common,
                self.texts.prompt(extra),
                prompt_id,
                clock.advance(rng.randrange(20_000, 600_000)),
            )
        )
        self.head = prompt_id
        for call in range(rng.choice((1, 1, 2, 3))):
            message_id, request_id, tool = ids.hex(24), ids.hex(24), ids.hex(24)
            if call == 0:
                self._assistant(_THINKING % (self.texts.thinking(), ids.hex(64)), message_id, request_id)
                self._assistant(_TEXT % self.texts.reply(), message_id, request_id)
            heavy = habits.heavy_every and self.written >= self._next_heavy
            kind = 0.0 if heavy else rng.random()  # a Bash command printed the megabytes
            path = b"%s/src/%s" % (self.cwd, self.texts.file())
            if kind < 0.6:
                self._assistant(_BASH % (tool, self.texts.command()), message_id, request_id)
            else:
                self._assistant((_READ if kind < 0.85 else _EDIT) % (tool, path), message_id, request_id)
            caller = self.head
            if rng.random() < 0.3:
                uid = ids.uuid()
                self._put(_PROGRESS % (self.head, self.common, tool, tool, uid, clock.advance(rng.randrange(50, 900))))
                self.head = uid
            uid, now = ids.uuid(), clock.advance(rng.randrange(100, 9000))
            if heavy:
                self._next_heavy = self.written + habits.heavy_every
                blob = self.blobs.heavy(habits.heavy_size)
                self._put(_RESULT % (self.head, self.common, tool, blob, uid, now, blob, caller))
            elif kind < 0.6:
                blob = self.blobs.pick(max(0, target - self.written) // 2).text
                self._put(_RESULT % (self.head, self.common, tool, blob, uid, now, blob, caller))
            elif kind < 0.85:
                out = self.blobs.pick(max(0, target - self.written) // 2)
                record = (
                    self.head,
                    self.common,
                    tool,
                    out.numbered,
                    uid,
                    now,
                    path,
                    out.text,
                    out.lines,
                    out.lines,
                    caller,
                )
                self._put(_READ_RESULT % record)
            else:
                out = self.blobs.pick(max(0, target - self.written) // 2)
                snippet = self.blobs.pick(600).numbered
                start = rng.randrange(1, max(2, out.lines))
                edit = (start, 3, start, 4, out.patch)
                self._put(
                    _EDIT_RESULT
                    % (self.head, self.common, tool, path, snippet, uid, now, path, out.text, *edit, caller)
                )
            self.head = uid
        self._assistant(_TEXT % self.texts.reply(), ids.hex(24), ids.hex(24))
        if rng.random() < 0.2:
            uid = ids.uuid()
            self._put(_DURATION % (self.head, self.common, rng.randrange(2000, 90_000), uid, clock.advance(10)))
            self.head = uid
        self.turns += 1

    def compact(self) -> None:
        """Auto-compaction: a parentless boundary, then the summary the conversation continues from."""
        boundary, summary = self.ids.uuid(), self.ids.uuid()
        self._put(
            _BOUNDARY
            % (self.head or b"", self.common, self.rng.randrange(150_000, 190_000), boundary, self.clock.advance(1000))
        )
        self._put(_SUMMARY_PROMPT % (boundary, self.common, self.texts.summary(), summary, self.clock.advance(10)))
        self.head = summary

    def metadata(self, title: bytes | None, summary: bool) -> None:
        """The records Claude Code adds beside the chain: a summary of a leaf, a title the person set."""
        if summary and self.head is not None:
            self._put(_SUMMARY % (self.texts.summary(), self.head))
        if title is not None:
            self._put(_TITLE % (title, self.session_id))


def last_chain_record(path: Path) -> dict[str, object]:
    """The last main-chain record of a transcript, read from its end."""
    with path.open("rb") as file:
        end = file.seek(0, 2)
        tail = b""
        position = end
        while position > 0:
            step = min(position, 1 << 20)
            position -= step
            file.seek(position)
            tail = file.read(step) + tail
            lines = tail.split(b"\n")
            complete = lines if position == 0 else lines[1:]
            for line in reversed(complete):
                if not line.strip():
                    continue
                record = json.loads(line)
                if record.get("type") in _CHAIN and "uuid" in record and not record.get("isSidechain"):
                    return dict(record)
            tail = lines[0] if position else b""
    raise ValueError(f"{path} holds no chain record")
