"""Reading the folder of JSON files OpenCode kept its sessions in before 1.2 (`storage/`).

`storage/session/<project id>/<session id>.json` is a session's info (`parentID`, `directory`,
`title`, `time.created`, `time.updated`), `storage/message/<session id>/<message id>.json` a
message's info and `storage/part/<message id>/<part id>.json` one of its parts; ids are the file
names, as OpenCode's own migration to the database takes them. The folder has no cheap signature,
so each check takes a mark of every session from the `stat` of its files (its info, each
message file and each message's part folder): OpenCode rewrites a message file when the reply
is complete and adds part files to the part folder. A file that is not a JSON object, or that
vanishes while it is read, is left out and counted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from dsh_sources.folders import names
from dsh_sources.formats.opencode_projection import MessageInfo, SessionInfo, created_ms, json_object, mark, project
from dsh_sources.lines import ReadCancelled
from dsh_sources.transcript import WHOLE, SessionRead, SessionSink, StoreRead, deal

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue


def _load(path: str) -> dict[str, JsonValue] | None:
    """The JSON object in the file, or None when it holds none or cannot be read."""
    try:
        with open(path, "rb") as file:
            return json_object(file.read())
    except OSError:
        return None


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


def read_storage(
    storage: str,
    marks: Mapping[str, str],
    sink: SessionSink,
    cancel: threading.Event | None = None,
    share: tuple[int, int] = WHOLE,
) -> StoreRead:
    """Every root session's mark, and each session whose mark is not the one in `marks` (of those `share`
    deals this read, weighed by their messages) read again into `sink`."""
    skipped = 0
    now: dict[str, str] = {}
    moved: list[tuple[SessionInfo, str, int]] = []
    sessions = os.path.join(storage, "session")
    for project_id in names(sessions):
        folder = os.path.join(sessions, project_id)
        for name in names(folder, ".json"):
            sid = name[: -len(".json")]
            if sid in now:
                continue  # the same session under a second project: the first one read serves it
            path = os.path.join(folder, name)
            messages = os.path.join(storage, "message", sid)
            stamps = [
                (message, _stamp(os.path.join(messages, message)), _stamp(_part_folder(storage, message)))
                for message in names(messages, ".json")
            ]
            stamp = mark(_stamp(path), stamps)
            if marks.get(sid) == stamp:
                now[sid] = stamp
                continue
            info = _load(path)
            if info is None:
                skipped += 1
                continue
            session = _session(sid, info)
            now[sid] = stamp
            if session.parent is None:  # a subagent's task is shown in its parent's conversation, not listed
                moved.append((session, stamp, len(stamps)))
    mine = deal([(session.id, weight) for session, _, weight in moved], share)
    for session, stamp, _ in moved:
        if session.id in mine:
            if cancel is not None and cancel.is_set():
                raise ReadCancelled
            read = _Messages(storage, session.id, cancel)
            facts, said = project(session, read)
            sink(SessionRead(session.id, stamp, facts, said, read.bad))
    return StoreRead(storage, None, now, skipped)


def _part_folder(storage: str, message: str) -> str:
    return os.path.join(storage, "part", message[: -len(".json")])


def _session(sid: str, info: dict[str, JsonValue]) -> SessionInfo:
    time = info.get("time")
    times = time if isinstance(time, dict) else {}
    fields = (
        info.get("parentID"),
        info.get("directory"),
        info.get("title"),
        times.get("created"),
        times.get("updated"),
    )
    return SessionInfo.of(sid, *fields)


class _Messages:
    """A session's messages with their parts, in OpenCode's order, read a message at a time.

    Files do not say their order: each message's info is read once for its creation time, and
    again when its turn comes, with its parts, so only one message's parts are held at a time.
    `bad` counts the files of the last pass that were left out; a set `cancel` stops the pass
    before the next message (`ReadCancelled`).
    """

    def __init__(self, storage: str, sid: str, cancel: threading.Event | None) -> None:
        self.storage = storage
        self.folder = os.path.join(storage, "message", sid)
        self.cancel = cancel
        self.bad = 0

    def __call__(self) -> Iterator[MessageInfo]:
        self.bad = 0
        order: list[tuple[int, str]] = []
        for name in names(self.folder, ".json"):
            info = self._info(name)
            if info is not None:
                order.append((created_ms(info) or 0, name[: -len(".json")]))
        order.sort()
        for created, message_id in order:
            if self.cancel is not None and self.cancel.is_set():
                raise ReadCancelled
            info = self._info(message_id + ".json")
            if info is None:
                continue
            parts: list[dict[str, JsonValue]] = []
            part_folder = os.path.join(self.storage, "part", message_id)
            for part_name in names(part_folder, ".json"):
                part = _load(os.path.join(part_folder, part_name))
                if part is None:
                    self.bad += 1
                else:
                    parts.append(part)
            yield MessageInfo(message_id, created, info, parts)

    def _info(self, name: str) -> dict[str, JsonValue] | None:
        info = _load(os.path.join(self.folder, name))
        if info is None:
            self.bad += 1
        return info
