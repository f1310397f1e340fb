"""The JSONL interchange format: a header line, then one event a line, compact JSON.

`parse_log` validates every line before anything is imported: the header, each event's
envelope, seq contiguity and the surface fold. A bad line is reported with its line number, a
line nested deeper than the host accepts (`MAX_DEPTH`) included.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dsh_host.errors import DshError
from dsh_host.jstext import escape_lone_surrogates
from dsh_host.session.events import Event, InvalidEvent, SessionHeader, event_from_json, header_from_json
from dsh_host.session.lossless import MAX_DEPTH
from dsh_host.session.surface import Surface, SurfaceError, plan


class InvalidLog(DshError, ValueError):
    """A JSONL log that cannot be imported; the message names the file and line."""


@dataclass(frozen=True)
class ParsedLog:
    header: SessionHeader
    events: list[Event]


def _strict_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def parse_log(lines: Iterable[str], *, name: str = "<log>") -> ParsedLog:
    """Validate a whole log; raise InvalidLog naming `name` and the 1-based line number."""
    header: SessionHeader | None = None
    events: list[Event] = []
    surface = Surface()
    for number, line in enumerate(lines, start=1):
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
            surface.apply(plan(event, surface.nodes, events.__getitem__))
        except (InvalidEvent, SurfaceError, ValueError) as exc:
            raise InvalidLog(f"{name}:{number}: {exc}") from None
        events.append(event)
    if header is None:
        raise InvalidLog(f"{name}: empty or header-less session log")
    return ParsedLog(header, events)


def read_log_file(path: Path) -> ParsedLog:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidLog(f"{path}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidLog(f"{path}: not valid UTF-8 at byte {exc.start}") from None
    # Lines end at LF alone: `str.splitlines` also breaks at U+2028, U+0085, VT, FF and the like,
    # which JSON.stringify leaves raw inside strings.
    return parse_log(io.StringIO(text, newline="\n"), name=str(path))


def export_lines(header: SessionHeader, event_lines: Iterable[str]) -> Iterator[str]:
    """The log as JSONL lines (each ending in a newline), valid UTF-8 whatever the strings hold.

    The reference writes each line with `JSON.stringify`, which escapes a lone surrogate as
    `\\udXXX` where `json.dumps(ensure_ascii=False)` leaves it raw (and unencodable): an imported
    log exports byte for byte as it came in.
    """
    yield escape_lone_surrogates(json.dumps(header.to_json(), ensure_ascii=False, separators=(",", ":"))) + "\n"
    for line in event_lines:
        yield escape_lone_surrogates(line) + "\n"
