"""OpenCode's session stores, written as OpenCode writes them: its database (1.2+) and its older JSON folder.

The tables are those OpenCode's migrations create (packages/opencode/migration/, mirrored in
`MIGRATIONS`): 1.2.0's `20260127222353_familiar_lady_ursula` (project, message, part,
permission, session, todo, session_share and their indexes), `20260211171708_add_project_commands`
and `20260213144116_wakeful_the_professor`; `LATER_COLUMNS` adds the session columns later
versions added (workspace, path, agent, model, usage, metadata), which a reader must not need.
Rows follow packages/opencode/src/session/session.sql.ts and message-v2.ts: `message.data` is
the message info without `id`/`sessionID`, `part.data` the part without `id`/`sessionID`/
`messageID`; ids are `ses_` + 12 hex digits that descend with time + 14 base62 characters, and
`msg_`/`prt_` ids ascend. The database is in WAL mode with OpenCode's busy timeout, as OpenCode
opens it. `StorageWriter` writes the same sessions as the JSON folder of versions before 1.2
(packages/opencode/src/storage/json-migration.ts reads it: `storage/session/<project>/<ses>.json`,
`storage/message/<ses>/<msg>.json`, `storage/part/<msg>/<prt>.json`, each with its ids).

Used by the tests (`tests/dsh_sources/opencode_builders.py`) and, at scale (`generate_opencode`), by
`python -m bench.corpus OUT --opencode-gb G`.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.corpus.material import BASE_MS, CWDS, DAY_MS, TOPICS, Blobs, SessionFile, Texts, session_start

SESSIONS_PER_GB = 5_000
BIG_SHARE = 0.25
MAX_SESSIONS = 10_000

MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "20260127222353_familiar_lady_ursula",
        (
            "CREATE TABLE IF NOT EXISTS `project` (`id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, "
            "`name` text, `icon_url` text, `icon_color` text, `time_created` integer NOT NULL, "
            "`time_updated` integer NOT NULL, `time_initialized` integer, `sandboxes` text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS `message` (`id` text PRIMARY KEY, `session_id` text NOT NULL, "
            "`time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL, "
            "CONSTRAINT `fk_message_session_id_session_id_fk` FOREIGN KEY (`session_id`) "
            "REFERENCES `session`(`id`) ON DELETE CASCADE)",
            "CREATE TABLE IF NOT EXISTS `part` (`id` text PRIMARY KEY, `message_id` text NOT NULL, "
            "`session_id` text NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, "
            "`data` text NOT NULL, CONSTRAINT `fk_part_message_id_message_id_fk` FOREIGN KEY (`message_id`) "
            "REFERENCES `message`(`id`) ON DELETE CASCADE)",
            "CREATE TABLE IF NOT EXISTS `permission` (`project_id` text PRIMARY KEY, `time_created` integer NOT NULL, "
            "`time_updated` integer NOT NULL, `data` text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS `session` (`id` text PRIMARY KEY, `project_id` text NOT NULL, "
            "`parent_id` text, `slug` text NOT NULL, `directory` text NOT NULL, `title` text NOT NULL, "
            "`version` text NOT NULL, `share_url` text, `summary_additions` integer, `summary_deletions` integer, "
            "`summary_files` integer, `summary_diffs` text, `revert` text, `permission` text, "
            "`time_created` integer NOT NULL, `time_updated` integer NOT NULL, `time_compacting` integer, "
            "`time_archived` integer, CONSTRAINT `fk_session_project_id_project_id_fk` FOREIGN KEY (`project_id`) "
            "REFERENCES `project`(`id`) ON DELETE CASCADE)",
            "CREATE TABLE IF NOT EXISTS `todo` (`session_id` text NOT NULL, `content` text NOT NULL, "
            "`status` text NOT NULL, `priority` text NOT NULL, `position` integer NOT NULL, "
            "`time_created` integer NOT NULL, `time_updated` integer NOT NULL, "
            "CONSTRAINT `todo_pk` PRIMARY KEY(`session_id`, `position`))",
            "CREATE TABLE IF NOT EXISTS `session_share` (`session_id` text PRIMARY KEY, `id` text NOT NULL, "
            "`secret` text NOT NULL, `url` text NOT NULL, `time_created` integer NOT NULL, "
            "`time_updated` integer NOT NULL)",
            "CREATE INDEX IF NOT EXISTS `message_session_idx` ON `message` (`session_id`)",
            "CREATE INDEX IF NOT EXISTS `part_message_idx` ON `part` (`message_id`)",
            "CREATE INDEX IF NOT EXISTS `part_session_idx` ON `part` (`session_id`)",
            "CREATE INDEX IF NOT EXISTS `session_project_idx` ON `session` (`project_id`)",
            "CREATE INDEX IF NOT EXISTS `session_parent_idx` ON `session` (`parent_id`)",
            "CREATE INDEX IF NOT EXISTS `todo_session_idx` ON `todo` (`session_id`)",
        ),
    ),
    ("20260211171708_add_project_commands", ("ALTER TABLE `project` ADD `commands` text",)),
    (
        "20260213144116_wakeful_the_professor",
        (
            "CREATE TABLE IF NOT EXISTS `control_account` (`email` text NOT NULL, `url` text NOT NULL, "
            "`access_token` text NOT NULL, `refresh_token` text NOT NULL, `token_expiry` integer, "
            "`active` integer NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, "
            "PRIMARY KEY(`email`, `url`))",
        ),
    ),
)
LATER_COLUMNS = (
    "ALTER TABLE `session` ADD `workspace_id` text",
    "ALTER TABLE `session` ADD `path` text",
    "ALTER TABLE `session` ADD `agent` text",
    "ALTER TABLE `session` ADD `model` text",
    "ALTER TABLE `session` ADD `cost` real DEFAULT 0 NOT NULL",
    "ALTER TABLE `session` ADD `tokens_input` integer DEFAULT 0 NOT NULL",
    "ALTER TABLE `session` ADD `tokens_output` integer DEFAULT 0 NOT NULL",
    "ALTER TABLE `session` ADD `metadata` text",
)
"""Session columns added after 1.2.5 (workspace 2026-02-27, path 04-28, agent and model 05-01, usage 05-10)."""

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MODEL = "claude-sonnet-4-5"
PROVIDER = "anthropic"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Ids:
    """OpenCode's ids: a prefix, 12 hex digits of time and a counter (descending for sessions), 14 base62."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._count = 0

    def make(self, prefix: str, ms: int, *, descending: bool = False) -> str:
        self._count += 1
        stamp = (ms * 0x1000 + self._count) & 0xFFFFFFFFFFFF
        if descending:
            stamp = ~stamp & 0xFFFFFFFFFFFF
        return f"{prefix}_{stamp:012x}" + "".join(self._rng.choice(_BASE62) for _ in range(14))


class OpenCodeWriter(ABC):
    """Sessions, messages and parts as OpenCode makes them; where they go is the subclass's (`_put_*`)."""

    def __init__(self, seed: int = 0, clock: int = 1_767_225_600_000) -> None:
        self.ids = Ids(seed)
        self.clock = clock
        self.project_id = "global"

    def tick(self, ms: int = 1000) -> int:
        self.clock += ms
        return self.clock

    # -- what a subclass stores ---------------------------------------------------------------

    @abstractmethod
    def _put_session(self, row: dict[str, Any]) -> None:
        """Store it."""

    @abstractmethod
    def _put_message(self, sid: str, mid: str, created: int, info: dict[str, Any]) -> None:
        """Store it."""

    @abstractmethod
    def _put_part(self, sid: str, mid: str, pid: str, created: int, part: dict[str, Any]) -> None:
        """Store it."""

    # -- what OpenCode writes -----------------------------------------------------------------

    def session(self, directory: str, title: str, *, parent: str | None = None, sid: str | None = None) -> str:
        """A new session (a child one when `parent` is given); its id."""
        created = self.tick()
        sid = sid or self.ids.make("ses", created, descending=True)
        self._put_session(
            {
                "id": sid,
                "project_id": self.project_id,
                "parent_id": parent,
                "slug": "brave-" + sid[-6:].lower(),
                "directory": directory,
                "title": title,
                "version": "1.2.5",
                "time_created": created,
                "time_updated": created,
            }
        )
        return sid

    def message(self, sid: str, info: dict[str, Any], parts: list[dict[str, Any]]) -> str:
        """A message (`info` without ids) with its parts (without ids), written as OpenCode does; its id."""
        created = self.tick()
        mid = self.ids.make("msg", created)
        info = {**info, "time": {"created": created, **info.get("time", {})}}
        self._put_message(sid, mid, created, info)
        for part in parts:
            self._put_part(sid, mid, self.ids.make("prt", self.tick(1)), created, part)
        return mid

    def user(
        self,
        sid: str,
        text: str | None,
        *,
        synthetic: tuple[str, ...] = (),
        ignored: tuple[str, ...] = (),
        extra: tuple[dict[str, Any], ...] = (),
    ) -> str:
        """A prompt: its text part, parts OpenCode adds itself (`synthetic`), `ignored` ones and `extra` parts."""
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
        parts += [{"type": "text", "text": note, "synthetic": True} for note in synthetic]
        parts += [{"type": "text", "text": note, "ignored": True} for note in ignored]
        parts += list(extra)
        info = {"role": "user", "agent": "build", "model": {"providerID": PROVIDER, "modelID": MODEL}}
        return self.message(sid, info, parts)

    def assistant(
        self,
        sid: str,
        parent: str,
        texts: tuple[str, ...],
        *,
        reasoning: str | None = None,
        tool_output: str | None = None,
        summary: bool = False,
        finish: str | None = "stop",
        error: dict[str, Any] | None = None,
        cwd: str = "/work/project",
    ) -> str:
        """A reply to `parent`: step start, reasoning, a tool call, texts, step finish (`summary`: a compaction's)."""
        parts: list[dict[str, Any]] = [{"type": "step-start", "snapshot": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}]
        if reasoning is not None:
            parts.append({"type": "reasoning", "text": reasoning, "time": {"start": self.clock, "end": self.clock}})
        if tool_output is not None:
            parts.append(
                {
                    "type": "tool",
                    "callID": "toolu_" + self.ids.make("prt", self.clock)[4:],
                    "tool": "bash",
                    "state": {
                        "status": "completed",
                        "input": {"command": "ls"},
                        "output": tool_output,
                        "title": "ls",
                        "metadata": {},
                        "time": {"start": self.clock, "end": self.clock},
                    },
                }
            )
        parts += [{"type": "text", "text": text, "time": {"start": self.clock, "end": self.clock}} for text in texts]
        tokens = {"input": 1200, "output": 80, "reasoning": 0, "cache": {"read": 0, "write": 0}}
        parts.append({"type": "step-finish", "reason": finish or "stop", "cost": 0, "tokens": tokens})
        info: dict[str, Any] = {
            "role": "assistant",
            "parentID": parent,
            "modelID": MODEL,
            "providerID": PROVIDER,
            "mode": "build",
            "agent": "build",
            "path": {"cwd": cwd, "root": cwd},
            "cost": 0,
            "tokens": tokens,
            "time": {"completed": self.clock + 500},
        }
        if summary:
            info["summary"] = True
        if finish is not None:
            info["finish"] = finish
        if error is not None:
            info["error"] = error
        return self.message(sid, info, parts)

    def compaction(self, sid: str, *, tail_start_id: str | None = None) -> str:
        """The user message OpenCode adds to ask for a compaction (answer it with `assistant(..., summary=True)`)."""
        part: dict[str, Any] = {"type": "compaction", "auto": True}
        if tail_start_id is not None:
            part["tail_start_id"] = tail_start_id
        return self.user(sid, None, extra=(part,))


class DatabaseWriter(OpenCodeWriter):
    """Writes `opencode.db` as OpenCode 1.2 does (`later_columns`: with the session columns added since).

    An existing database is opened as it is (its tables made), as OpenCode opens it again.
    """

    def __init__(self, path: Path, *, later_columns: bool = False, seed: int = 0) -> None:
        super().__init__(seed)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA busy_timeout = 5000")
        made = self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session'").fetchone()
        with self.transaction():
            for _, statements in () if made else MIGRATIONS:
                for statement in statements:
                    self.conn.execute(statement)
            if later_columns and not made:
                for statement in LATER_COLUMNS:
                    self.conn.execute(statement)
            self.conn.execute(
                "INSERT OR IGNORE INTO project (id, worktree, time_created, time_updated, sandboxes) "
                "VALUES (?, '/', ?, ?, '[]')",
                (self.project_id, self.clock, self.clock),
            )

    def transaction(self) -> _Transaction:
        """`with writer.transaction():` what is written inside commits at once."""
        return _Transaction(self.conn)

    def _put_session(self, row: dict[str, Any]) -> None:
        names = ", ".join(row)
        self.conn.execute(f"INSERT INTO session ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))

    def _put_message(self, sid: str, mid: str, created: int, info: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
            (mid, sid, created, created, dumps(info)),
        )
        self.conn.execute("UPDATE session SET time_updated = ? WHERE id = ?", (created, sid))

    def _put_part(self, sid: str, mid: str, pid: str, created: int, part: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?)",
            (pid, mid, sid, created, created, dumps(part)),
        )

    def close(self) -> None:
        self.conn.close()


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self._conn.execute("COMMIT" if kind is None else "ROLLBACK")


class StorageWriter(OpenCodeWriter):
    """Writes the `storage/` folder of OpenCode before 1.2, each record a JSON file named by its id."""

    def __init__(self, storage: Path, *, seed: int = 0) -> None:
        super().__init__(seed)
        self.storage = storage

    def _write(self, relative: str, value: dict[str, Any]) -> None:
        path = self.storage / relative
        os.makedirs(path.parent, exist_ok=True)
        path.write_text(json.dumps(value, ensure_ascii=False, indent=2))

    def _put_session(self, row: dict[str, Any]) -> None:
        info: dict[str, Any] = {
            "id": row["id"],
            "slug": row["slug"],
            "version": "1.1.40",
            "projectID": row["project_id"],
            "directory": row["directory"],
            "title": row["title"],
            "time": {"created": row["time_created"], "updated": row["time_updated"]},
        }
        if row["parent_id"]:
            info["parentID"] = row["parent_id"]
        self._write(f"session/{row['project_id']}/{row['id']}.json", info)

    def _put_message(self, sid: str, mid: str, created: int, info: dict[str, Any]) -> None:
        self._write(f"message/{sid}/{mid}.json", {"id": mid, "sessionID": sid, **info})

    def _put_part(self, sid: str, mid: str, pid: str, created: int, part: dict[str, Any]) -> None:
        self._write(f"part/{mid}/{pid}.json", {"id": pid, "sessionID": sid, "messageID": mid, **part})


@dataclass(frozen=True)
class OpenCodeCorpus:
    """What `generate_opencode` wrote: the data folder to mount as `[sources.opencode] dir`, and counts.

    `sessions` counts root sessions (those listed), the big one included; `big` is the big
    session, its `bytes` the length of its message and part rows' JSON.
    """

    dir: str
    database: str
    sessions: int
    children: int
    messages: int
    bytes: int
    seconds: float
    big: SessionFile
    gb: float
    """What was asked: the size, the seed and the big session's size (the same three write the same rows)."""
    seed: int
    big_gb: float


def generate_opencode(folder: Path, gb: float, seed: int = 0, *, big_gb: float | None = None) -> OpenCodeCorpus:
    """An OpenCode data folder holding `opencode.db` of about `gb` GB, as a heavy OpenCode user's.

    About 5,000 root sessions per GB (at most 10,000) of skewed sizes in the corpus's cwds, each
    exchange a prompt and a reply with reasoning, a tool call (most bytes are its output, as in
    real databases) and text; one session in 20 compacted along the way, one in 10 with a
    subagent's child session. One of them is big: `big_gb` GB (default a quarter of `gb`, as
    Gemini CLI's), compacted a dozen times, written last from random streams of its own, so the
    other sessions are the same rows whatever its size. Closed as OpenCode leaves it:
    checkpointed, without -wal or -shm.
    """
    big_gb = gb * BIG_SHARE if big_gb is None else big_gb
    big_size = int(big_gb * 1e9)
    if gb <= 0:
        raise ValueError(f"--opencode-gb must be positive, not {gb}")
    if big_size <= 0:
        raise ValueError(f"the big OpenCode session must be positive, not {big_size} bytes")
    began = time.perf_counter()
    rng = random.Random(seed)
    outputs = [json.loads(b'"' + output.text + b'"') for output in Blobs(random.Random(seed + 1)).pool]
    folder.mkdir(parents=True, exist_ok=True)
    db = DatabaseWriter(folder / "opencode.db", seed=seed)
    db.conn.execute("PRAGMA synchronous = OFF")  # a generator's speed; OpenCode's own writes are what is read
    total = gb * 1e9 * (1 - BIG_SHARE)
    count = max(5, min(MAX_SESSIONS, round(gb * SESSIONS_PER_GB)))
    weights = [rng.lognormvariate(0.0, 1.1) for _ in range(count - 1)]
    scale = total / sum(weights)
    children = messages = 0
    for weight in weights:
        target = max(2_000, int(weight * scale))
        texts = Texts(rng, rng.choice(TOPICS))
        with db.transaction():
            db.clock = session_start(rng)
            cwd = rng.choice(CWDS)
            compact_every = target // 2 if rng.random() < 0.05 else 0
            sid, written = _session(db, rng, texts, outputs, cwd, target, compact_every)
            messages += written
            if rng.random() < 0.1:
                child = db.session(cwd, f"explore the {texts.topic} (@general subagent)", parent=sid)
                task = db.user(child, texts.prompt().decode())
                db.assistant(child, task, (texts.reply().decode(),), cwd=cwd)
                children += 1
                messages += 2
    big_rng = random.Random(seed + 2)
    with db.transaction():
        db.clock = BASE_MS + 3 * DAY_MS
        texts = Texts(big_rng, big_rng.choice(TOPICS))
        sid, written = _session(db, big_rng, texts, outputs, CWDS[3], big_size, max(64_000, big_size // 12))
        messages += written
    (big_bytes,) = db.conn.execute(
        "SELECT (SELECT total(length(data)) FROM message WHERE session_id = ?1)"
        " + (SELECT total(length(data)) FROM part WHERE session_id = ?1)",
        (sid,),
    ).fetchone()
    db.close()
    return OpenCodeCorpus(
        dir=str(folder),
        database=str(db.path),
        sessions=count,
        children=children,
        messages=messages,
        bytes=os.path.getsize(db.path),
        seconds=time.perf_counter() - began,
        big=SessionFile(str(db.path), f"opencode:{sid}", CWDS[3], int(big_bytes)),
        gb=gb,
        seed=seed,
        big_gb=big_gb,
    )


def _session(
    db: DatabaseWriter,
    rng: random.Random,
    texts: Texts,
    outputs: list[str],
    cwd: str,
    target: int,
    compact_every: int,
) -> tuple[str, int]:
    """A root session of about `target` bytes of rows, compacted every `compact_every` bytes (0: never),
    never at its end; its id and how many messages it holds."""
    sid = db.session(cwd, f"Work on the {texts.topic}")
    written = messages = 0
    next_compaction = compact_every or target
    while written < target:
        if written >= next_compaction:
            next_compaction += compact_every
            ask = db.compaction(sid)
            db.assistant(sid, ask, (texts.summary().decode(),), summary=True, cwd=cwd)
            messages += 2
        prompt = db.user(sid, texts.prompt().decode())
        output = outputs[rng.randrange(len(outputs))]
        reply = texts.reply().decode()
        db.assistant(sid, prompt, (reply,), reasoning=texts.thinking().decode(), tool_output=output, cwd=cwd)
        messages += 2
        written += len(output) + 5_000  # the rows, reply, reasoning and index entries around it
    return sid, messages
