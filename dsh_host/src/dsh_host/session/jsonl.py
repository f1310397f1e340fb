"""The JSONL interchange format: a header line, then one event a line, compact JSON.

`parse_log` validates every line before anything is imported: the header, each event's
envelope, seq contiguity and the surface fold. A bad line is reported with its line number, a
line nested deeper than the host accepts (`MAX_DEPTH`) included.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dsh_host.errors import DshError
from dsh_host.session.events import Event, InvalidEvent, SessionHeader, event_from_json, header_from_json
from dsh_host.session.lossless import MAX_DEPTH
from dsh_host.session.surface import Surface, SurfaceError, plan_transition
from dsh_host.text import escape_lone_surrogates


class InvalidLog(DshError, ValueError):
    """A JSONL log that cannot be imported; the message names the file and line."""


@dataclass(frozen=True)
class ParsedLog:
    header: SessionHeader
    events: list[Event]


def _strict_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def parse_log(lines: Iterable[str], *, name: str = "<log>", first_line: int = 1) -> ParsedLog:
    """Validate a whole log; raise InvalidLog naming `name` and the 1-based line number.

    `first_line` is the number of the log's first line in its file (a file may hold several).
    """
    header: SessionHeader | None = None
    events: list[Event] = []
    surface = Surface()
    for number, line in enumerate(lines, start=first_line):
        if not line.endswith("\n") and line:
            raise InvalidLog(f"{name}:{number}: torn final line (no newline)")
        text = line.rstrip("\n")
        if not text.strip():
            raise InvalidLog(f"{name}:{number}: empty line")
        try:
            raw = json.loads(text, parse_constant=_strict_constant)
        except RecursionError:
            # The C parser recurses once per level; what it cannot read, the host does not keep.
            raise InvalidLog(f"{name}:{number}: nested too deeply (this host accepts {MAX_DEPTH} levels)") from None
        except ValueError as exc:
            raise InvalidLog(f"{name}:{number}: not valid JSON ({exc})") from None
        try:
            if header is None:
                header = header_from_json(raw)
                continue
            event = event_from_json(raw, expected_seq=len(events))
            surface.apply(plan_transition(event, surface.nodes, events.__getitem__))
        except (InvalidEvent, SurfaceError, ValueError) as exc:
            raise InvalidLog(f"{name}:{number}: {exc}") from None
        events.append(event)
    if header is None:
        raise InvalidLog(f"{name}: empty or header-less session log")
    return ParsedLog(header, events)


def read_log_file(path: Path) -> ParsedLog:
    return parse_log(_lines(path.read_bytes, str(path)), name=str(path))


def read_logs(read: Callable[[], bytes], name: str) -> list[ParsedLog]:
    """Every log of a file holding one or more, one after another (as `export --all` writes them).

    Each log starts at its header line; all of them are validated before any is returned.
    """
    logs: list[ParsedLog] = []
    chunk: list[str] = []
    start = 1
    for number, line in enumerate(_lines(read, name), start=1):
        if chunk and _is_header(line):
            logs.append(parse_log(chunk, name=name, first_line=start))
            chunk, start = [], number
        chunk.append(line)
    logs.append(parse_log(chunk, name=name, first_line=start))
    return logs


def _is_header(line: str) -> bool:
    # Only a line that mentions "session" can be a header: parse just those.
    if '"session"' not in line:
        return False
    try:
        raw = json.loads(line)
    except ValueError:
        return False  # parse_log reports it with its line number
    return isinstance(raw, dict) and raw.get("type") == "session" and "seq" not in raw


def _lines(read: Callable[[], bytes], name: str) -> io.StringIO:
    try:
        data = read()
    except OSError as exc:
        raise InvalidLog(f"{name}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidLog(f"{name}: not valid UTF-8 at byte {exc.start}") from None
    # Lines end at LF alone: `str.splitlines` also breaks at U+2028, U+0085, VT, FF and the like,
    # which JSON.stringify leaves raw inside strings.
    return io.StringIO(text, newline="\n")


def export_lines(header: SessionHeader, event_lines: Iterable[str]) -> Iterator[str]:
    """The log as JSONL lines (each ending in a newline), valid UTF-8 whatever the strings hold.

    The reference writes each line with `JSON.stringify`, which escapes a lone surrogate as
    `\\udXXX` where `json.dumps(ensure_ascii=False)` leaves it raw (and unencodable): an imported
    log exports byte for byte as it came in.
    """
    yield escape_lone_surrogates(json.dumps(header.to_json(), ensure_ascii=False, separators=(",", ":"))) + "\n"
    for line in event_lines:
        yield escape_lone_surrogates(line) + "\n"
