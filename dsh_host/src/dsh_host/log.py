"""The session log's helpers (public namespace `dsh_host.log`): reading events, the surface
fold, the messages and requests a log implies, and the log check.

The records themselves (`Event`, `SessionHeader`, `Session`, `SurfaceSnapshot`, ...) are
exported from `dsh_host`. docs/log-format.md describes the format these helpers read.

- Events: `event_from_json` validates one event in log form into an `Event` (`InvalidEvent`,
  `NotLosslessJson` for bad input); `surface_text` is the text a surface event shows;
  `PROMPT_DELIMITER` separates a baked prompt-prefix context from the prompt as typed.
- The surface: `Surface` holds the current nodes; `plan_transition` validates what appending an
  event would do to it (a `Transition`, or `SurfaceError`) without changing anything, and
  `Surface.apply` commits it.
- Messages and requests: `derive_event_message` is the model message of one surface event;
  `surface_messages` yields a surface's messages by role, as text; `rebuild_request` recomputes
  the model request of any step from the log alone, and `request_json` puts a sent
  `ModelRequest` in the same shape, so the two compare as plain JSON. `canonical_header` and
  `header_equals` read and compare `request/header` snapshots.
- The check: `check_log` runs the host's rules over a whole log and returns a `Violation` per
  broken rule and a `Note` per shape that reads fine but cannot be resumed; a plugin adds the
  rules of its own event types as `LogInvariant`s through the `dsh_log_invariants` hook.
  `InvalidLog` is a log file that cannot be read.
"""

from dsh_host.agent.reconstruct import rebuild_request, request_json
from dsh_host.session.check import LogInvariant, Note, Violation, check_log
from dsh_host.session.events import PROMPT_DELIMITER, InvalidEvent, event_from_json, surface_text
from dsh_host.session.jsonl import InvalidLog
from dsh_host.session.lossless import NotLosslessJson
from dsh_host.session.messages import SurfaceMessage, derive_event_message, surface_messages
from dsh_host.session.request_header import canonical_header, header_equals
from dsh_host.session.surface import Surface, SurfaceError, Transition, plan_transition

__all__ = [
    "PROMPT_DELIMITER",
    "InvalidEvent",
    "InvalidLog",
    "LogInvariant",
    "NotLosslessJson",
    "Note",
    "Surface",
    "SurfaceError",
    "SurfaceMessage",
    "Transition",
    "Violation",
    "canonical_header",
    "check_log",
    "derive_event_message",
    "event_from_json",
    "header_equals",
    "plan_transition",
    "rebuild_request",
    "request_json",
    "surface_messages",
    "surface_text",
]
