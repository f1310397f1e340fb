"""Gemini CLI's chat recordings, projected to dsh sessions (the format of the `gemini-cli` source).

Where: `[sources.gemini-cli] dir`, else `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`; sessions are
`tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id prefix>.json|.jsonl`, directly in `chats/`
(subagent sessions, nested under their parent's id or marked `kind: "subagent"`, are not
sessions). `<project>` is a slug of the project root's name, the root written in its
`.project_root` and registered in `projects.json`, or, in older folders, the sha256 of the root,
which gives the cwd only when the registry still names that root.

Up to v0.38 a file is one JSON object (`sessionId`, `projectHash`, `startTime`, `lastUpdated`,
`summary`, `kind`, `messages`) rewritten whole at every change: it is read whole every time.
Since v0.39 it is JSON lines: the metadata first, then message records (a record whose `id` was
seen before replaces that message where it stands), `{"$set": {...}}` merging metadata
(`$set.messages` replaces the whole history) and `{"$rewindTo": id}` dropping that message and
every later one (all of them when the id is unknown). A resumed `.json` gets a `.jsonl` twin under
the same session id: of the files of one id the one updated last serves it, as Gemini resumes it.

The conversation is what the person typed (`displayContent` where it differs from what was sent)
and the text Gemini showed: never tool calls or responses, thoughts or `thought: true` parts, the
context Gemini injects as user messages (`<session_context>`, `<hook_context>`), slash commands, or
info/error/warning records. A compression's summary (a user message holding a `<state_snapshot>`)
is a checkpoint, and Gemini's acknowledgement after it is left out. The title is the session's
`summary`, else its first prompt shortened. A file with no message to show is no session.

A JSON-lines file that grew is projected from its new records alone when the index keeps its
records' ids (large files): a record replacing or rewinding to a stored message reads the stored
messages after it back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host.sources import SourceMessage
from dsh_sources.folders import names
from dsh_sources.gemini_cli import NAME
from dsh_sources.lines import JsonDocument, JsonLines
from dsh_sources.reading import read_whole
from dsh_sources.transcript import (
    Facts,
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

PROJECTION = 1
"""The version of this module's projection rules: raise it when they change (the index reads files again)."""
_SESSION_FILE = re.compile(r"session-.+\.jsonl?\Z")
_IGNORED = ("/", "?", "<session_context>", "<hook_context>")
"""How user content Gemini itself leaves out of a resumed conversation begins (commands, injected context)."""
SNAPSHOT_TAG = "<state_snapshot>"
ACKNOWLEDGEMENT = "Got it. Thanks for the additional context!"
"""The reply Gemini puts after a compression's summary: not something it showed the person."""
_NONE, _SAID, _CHECKPOINT = 0, 1, 2
"""What a history entry shows: nothing, a message, or a compression checkpoint."""
_META_KEYS = ("sessionId", "startTime", "lastUpdated", "summary", "kind")


def _texts(content: JsonValue) -> list[str]:
    """The text parts of a part list (or a string, or one part), thoughts left out."""
    if isinstance(content, str):
        return [content]
    parts = content if isinstance(content, list) else [content]
    return [
        text
        for part in parts
        if type(part) is dict and not part.get("thought")
        for text in (part.get("text"),)
        if isinstance(text, str)
    ]


def _typed(message: SourceMessage) -> bool:
    """Whether the message is a prompt the person typed (not a reply, not a checkpoint)."""
    return message.role == "user" and message.source.get("kind") == "user"


def _shown(texts: list[str]) -> tuple[str, ...]:
    """The text parts that show something (a part of only whitespace shows nothing)."""
    return tuple(text for text in texts if text.strip())


def _entry(record: dict[str, JsonValue], previous: int, at: int) -> tuple[int, SourceMessage | None]:
    """A message record as a history entry: what it shows (`_NONE`, `_SAID`, `_CHECKPOINT`) and its message.

    `previous` is what the entry before it shows (an acknowledgement only follows a checkpoint);
    `at` the record's time (for a record without one, the latest time before it).
    """
    kind = record.get("type")
    if kind == "user":
        parts = _texts(record.get("content"))
        sent = "".join(parts)
        stripped = sent.strip()
        if SNAPSHOT_TAG in sent:  # as Gemini itself finds an earlier summary in a history
            return _CHECKPOINT, SourceMessage("user", (stripped,), at, source=COMPACT_CHECKPOINT_SOURCE)
        if stripped.startswith(_IGNORED):
            return _NONE, None
        texts = _shown(_texts(record.get("displayContent"))) or _shown(parts)
        return (_SAID, SourceMessage("user", texts, at)) if texts else (_NONE, None)
    if kind == "gemini":
        texts = _shown(_texts(record.get("content")))
        if not texts or (previous == _CHECKPOINT and "".join(texts).strip() == ACKNOWLEDGEMENT):
            return _NONE, None
        model = record.get("model")
        named = model if isinstance(model, str) and model else "unknown"
        return _SAID, SourceMessage("assistant", texts, at, model=named)
    return _NONE, None


class _History:
    """The session's message entries in order: the first `base` as stored, then those read now.

    `ids` and `shows` cover every entry (stored ones too: a record may replace or rewind to one);
    `fresh` holds the messages of the entries from `base` on.
    """

    def __init__(self, stored: Stored, ids: list[str], shows: list[int]) -> None:
        self._stored = stored
        self.ids = ids
        self.shows = shows
        self.base = len(ids)
        self.fresh: list[SourceMessage | None] = []
        self._where: dict[str, int] | None = None

    def _index(self, message_id: str) -> int | None:
        if self._where is None:
            self._where = {mid: at for at, mid in enumerate(self.ids)}
        return self._where.get(message_id)

    def stored_count(self, stop: int) -> int:
        """How many stored messages the entries before `stop` (at most `base`) hold."""
        return sum(1 for shows in self.shows[:stop] if shows)

    def _reopen(self, at: int) -> None:
        """Make the entries from `at` on fresh, reading their stored messages back."""
        if at >= self.base:
            return
        saids = iter(self._stored.messages(self.stored_count(at), self.stored_count(self.base)))
        back: list[SourceMessage | None] = []
        for shows in self.shows[at : self.base]:
            said = next(saids, None) if shows else None
            if shows and said is None:
                raise Reread  # the index holds fewer messages than the state says
            back.append(None if said is None else said.message)
        self.fresh[:0] = back
        self.base = at

    def put(self, record: dict[str, JsonValue], message_id: str, when: int) -> SourceMessage | None:
        """Add a message record of time `when`, or replace the entry of the same id where it stands; its message."""
        at = self._index(message_id)
        if at is None:
            shows, message = _entry(record, self.shows[-1] if self.shows else _NONE, when)
            assert self._where is not None
            self._where[message_id] = len(self.ids)
            self.ids.append(message_id)
            self.shows.append(shows)
            self.fresh.append(message)
            return message
        self._reopen(at)
        shows, message = _entry(record, self.shows[at - 1] if at else _NONE, when)
        self.shows[at] = shows
        self.fresh[at - self.base] = message
        return message

    def rewind(self, message_id: str) -> None:
        """Drop the entry of `message_id` and every later one (every entry when it is not there)."""
        at = self._index(message_id)
        self.clear() if at is None else self._truncate(at)

    def clear(self) -> None:
        self._truncate(0)

    def _truncate(self, at: int) -> None:
        del self.ids[at:], self.shows[at:]
        if at < self.base:
            self.base, self.fresh = at, []
        else:
            del self.fresh[at - self.base :]
        self._where = None


class _Projector:
    """A Gemini CLI file's records projected, from its first byte or (JSON lines) from the stored state."""

    def __init__(self, path: str, state: Json | None, stored: Stored, cwd: str | None) -> None:
        st: Json = state or {}
        if state is not None and "ids" not in st:
            raise Reread  # a whole-JSON file, or a state that kept no ids: read from the start
        self._legacy = path.endswith(".json")
        self._keeps = stored.keeps_nodes and not self._legacy
        self._cwd = cwd
        self._meta: dict[str, JsonValue] = dict(st.get("meta", {}))
        self._prompt: str | None = st.get("prompt")
        self._first: int | None = st.get("first")
        self._latest: int | None = st.get("latest")
        self._history = _History(stored, list(st.get("ids", [])), [int(c) for c in st.get("shows", "")])

    def feed(self, record: dict[str, JsonValue]) -> None:
        history = self._history
        rewind, message_id, update = record.get("$rewindTo"), record.get("id"), record.get("$set")
        if isinstance(rewind, str):
            history.rewind(rewind)
        elif isinstance(message_id, str):
            self._message(record, message_id)
        elif type(update) is dict:
            messages = update.get("messages")
            if isinstance(messages, list):
                history.clear()
                self._messages(messages)
            self._merge(update)
        elif isinstance(record.get("sessionId"), str) and (self._legacy or isinstance(record.get("projectHash"), str)):
            self._merge(record)
            messages = record.get("messages")
            if isinstance(messages, list):
                self._messages(messages)

    def _merge(self, update: dict[str, JsonValue]) -> None:
        for key in _META_KEYS:
            if key in update:
                self._meta[key] = update[key]

    def _messages(self, messages: list[JsonValue]) -> None:
        for item in messages:
            if type(item) is dict and isinstance(item.get("id"), str):
                self._message(item, item["id"])

    def _message(self, record: dict[str, JsonValue], message_id: str) -> None:
        time = iso_ms(record.get("timestamp"))
        if time is not None:
            self._first = time if self._first is None else min(self._first, time)
            self._latest = time if self._latest is None else max(self._latest, time)
            when = time
        else:
            when = self._latest if self._latest is not None else 0
        message = self._history.put(record, message_id, when)
        if self._prompt is None and message is not None and _typed(message):
            self._prompt = "\n".join(message.texts)

    def finish(self) -> Update:
        history = self._history
        keep = history.stored_count(history.base)
        tail = tuple(Said(message) for message in history.fresh if message is not None)
        state: Json = {}
        count = keep + len(tail)
        facts = self._facts(count)
        # Only a file the index keeps keys of goes on from its state (the rest are read from their start), and
        # only when the index then holds the messages the state counts: all of them, or none when none show.
        if self._keeps and (facts is not None or not count):
            state = {
                "meta": self._meta,
                "prompt": self._prompt,
                "first": self._first,
                "latest": self._latest,
                "ids": history.ids,
                "shows": "".join(map(str, history.shows)),
            }
        if facts is None:
            return Update(state, None, 0, ())
        return Update(state, facts, keep, tail)

    def _facts(self, count: int) -> Facts | None:
        meta = self._meta
        agent_id = meta.get("sessionId")
        if not isinstance(agent_id, str) or not agent_id or meta.get("kind") == "subagent" or not count:
            return None
        latest = self._latest
        created = iso_ms(meta.get("startTime"))
        if created is None:
            created = self._first if self._first is not None else (latest or 0)
        updated = iso_ms(meta.get("lastUpdated"))
        if updated is None:
            updated = latest if latest is not None else created
        summary = meta.get("summary")
        title = summary if isinstance(summary, str) and summary.strip() else None
        return Facts(
            agent_id=agent_id,
            cwd=self._cwd,
            created_at=created,
            updated_at=updated,
            title=one_line(title or (prompt_title(self._prompt) if self._prompt else None)),
            messages=count,
        )


def read_session(path: str) -> Transcript | None:
    """A Gemini CLI session file projected whole, or None when it holds no session (OSError if unreadable).

    The file is expected at `<gemini folder>/tmp/<project>/chats/<name>`, which gives its cwd.
    """
    parents = Path(path).parents
    return read_whole(GeminiCliFormat(parents[min(3, len(parents) - 1)]), path)


class GeminiCliFormat:
    """Gemini CLI's session files under `<base>/tmp/<project>/chats/`."""

    provider = NAME

    def __init__(self, base: Path) -> None:
        self.base = base
        self._registry: tuple[tuple[int, int], dict[str, str]] | None = None
        self._roots: dict[str, str] = {}

    def files(self) -> Iterator[str]:
        """Every `session-*.json` and `session-*.jsonl` directly in a project's `chats/` (none in a missing folder)."""
        for project in names(self.base / "tmp"):
            chats = self.base / "tmp" / project / "chats"
            for name in names(chats):
                if _SESSION_FILE.match(name):
                    yield str(chats / name)

    def locate(self, agent_id: str) -> list[str]:
        """The session files whose name ends with `agent_id`'s first eight characters (as Gemini names them)."""
        if len(agent_id) < 8 or "/" in agent_id or "\0" in agent_id:
            return []
        ends = (f"-{agent_id[:8]}.json", f"-{agent_id[:8]}.jsonl")
        return [path for path in self.files() if path.endswith(ends)]

    def records(self, path: str) -> type[JsonLines]:
        """A legacy `.json` file is one JSON object; a `.jsonl` one a record a line."""
        return JsonDocument if path.endswith(".json") else JsonLines

    def projector(self, path: str, state: Json | None, stored: Stored) -> _Projector:
        return _Projector(path, state, stored, self.cwd_of(path))

    def titles(self) -> Mapping[str, str]:
        """None kept outside the files: a session's summary is in its file."""
        return {}

    def cwd_of(self, path: str) -> str | None:
        """The project root of a session file's folder, or None when nothing on disk names it."""
        project = Path(path).parent.parent
        known = self._roots.get(str(project))
        if known is not None:
            return known
        root: str | None = None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            root = absolute_cwd((project / ".project_root").read_text(encoding="utf-8").strip())
        if root is None:
            registry = self._registered()
            root = registry.get(project.name)
        if root is not None:
            self._roots[str(project)] = root
        return root

    def _registered(self) -> dict[str, str]:
        """`projects.json`'s roots by project folder name: the slug, and the hash older folders were named by."""
        path = self.base / "projects.json"
        try:
            info = path.stat()
            signature = (info.st_size, info.st_mtime_ns)
            if self._registry is not None and self._registry[0] == signature:
                return self._registry[1]
            data = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        projects = data.get("projects") if type(data) is dict else None
        roots: dict[str, str] = {}
        if type(projects) is dict:
            for root, slug in projects.items():
                if isinstance(slug, str) and absolute_cwd(root):
                    roots[slug] = root
                    roots.setdefault(hashlib.sha256(root.encode()).hexdigest(), root)
        self._registry = (signature, roots)
        return roots
