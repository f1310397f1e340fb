"""Sessions the web tests read: hand-written logs stored as they are, and a hostile one."""

from __future__ import annotations

from dsh_host import Host
from dsh_host.jsontypes import JsonValue
from dsh_host.testing import LogBuilder

HOSTILE_TEXT = (
    "<script>alert('x')</script> </li></ol><b>bold?</b> [click](javascript:alert(1)) "
    "<img src=x onerror=alert(1)> \x1b]0;owned\x07 \x1b[31mred\x1b[0m \u202egnp.exe\u202c "
    "lone \udc00 surrogate ![pixel](http://example.invalid/pixel.png)"
)
"""Text that tries each injection the pages must render inert and visible."""


def store_log(
    host: Host, session_id: str, raws: list[dict[str, JsonValue]], *, created_at: int, cwd: str | None
) -> None:
    """Store `raws` (events in log form) as session `session_id`, persisted, not live."""
    host.store.append(LogBuilder.header(session_id, created_at=created_at, cwd=cwd), LogBuilder.events(raws))


def conversation(
    *pairs: tuple[str, str], time: int = 0, title: str | None = None, steer: str | None = None
) -> list[dict[str, JsonValue]]:
    """A valid log of one turn per (question, answer) pair, each event at `time` + its seq ms.

    `title` is set in the first turn; `steer` is a steering message in the last turn's step.
    """
    raws: list[dict[str, JsonValue]] = []

    def add(raw: dict[str, JsonValue]) -> None:
        raw["time"] = time + len(raws)
        raws.append(raw)

    user = {"kind": "message", "source": {"kind": "user"}}
    for turn, (question, answer) in enumerate(pairs, start=1):
        add(LogBuilder.raw("turn/start", len(raws), {"turn": turn, "trigger": user}))
        add(LogBuilder.user(len(raws), question))
        add(LogBuilder.raw("step/start", len(raws), {"turn": turn, "step": 1}))
        add(LogBuilder.assistant(len(raws), answer, turn=turn))
        add(LogBuilder.raw("step/end", len(raws), {"turn": turn, "step": 1}))
        if steer is not None and turn == len(pairs):
            add(LogBuilder.steering(len(raws), steer, turn=turn))
            add(LogBuilder.raw("step/start", len(raws), {"turn": turn, "step": 2}))
            add(
                LogBuilder.raw(
                    "assistant/message", len(raws), LogBuilder.assistant_data("steered", turn, 2), op="append"
                )
            )
            add(LogBuilder.raw("step/end", len(raws), {"turn": turn, "step": 2}))
        if title is not None and turn == 1:
            add(
                LogBuilder.raw(
                    "session/title", len(raws), {"title": title, "messageSeqs": [1], "source": {"kind": "fallback"}}
                )
            )
        add(LogBuilder.raw("turn/end", len(raws), {"turn": turn, "reason": {"kind": "completed"}}))
    return raws
