"""Crash repair: the synthetic events that close a turn left open by a crash."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh_host.session.events import Event

if TYPE_CHECKING:
    from dsh_host.jsontypes import JsonValue

OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)


def interrupted_turn_closers(events: Sequence[Event]) -> list[dict[str, JsonValue]]:
    """Events (log form) that balance a log ending inside an open turn; [] when balanced.

    Pending tool calls get an error result (outcome unknown if a `tool/call` was logged, not
    started otherwise), then the open step and the turn are closed with reason `interrupted`.
    Seqs continue the log and the time of the last event is reused, so repair is deterministic.
    """
    open_turn: int | None = None
    open_step: int | None = None
    pending: dict[str, dict[str, JsonValue]] = {}
    for event in events:
        kind, data = event.type, event.data
        if kind == "turn/start":
            open_turn, open_step = data["turn"], None
            pending.clear()
        elif kind == "turn/end":
            open_turn, open_step = None, None
            pending.clear()
        elif kind == "step/start":
            open_step = data["step"]
        elif kind == "step/end":
            open_step = None
            pending.clear()
        elif kind == "assistant/message":
            for block in data.get("content", []):
                if isinstance(block, dict) and block.get("type") == "tool-call":
                    pending[block["id"]] = {"step": data.get("step")}
        elif kind == "tool/call":
            entry = pending.get(data.get("callId"))
            if entry is not None:
                entry["call_seq"] = event.seq
        elif kind == "tool/result":
            pending.pop(data.get("callId"), None)
    if open_turn is None or not events:
        return []
    last = events[-1]
    seq, when = last.seq + 1, last.time
    out: list[dict[str, JsonValue]] = []
    for call_id, entry in pending.items():
        started = "call_seq" in entry
        closer: dict[str, JsonValue] = {
            "type": "tool/result",
            "seq": seq,
            "time": when,
            "data": {
                "turn": open_turn,
                "step": entry["step"],
                "callId": call_id,
                "content": [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT}],
                "isError": True,
                "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
                if started
                else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
            },
            "surfaceOp": "append",
        }
        if started:
            closer["sourceEventSeqs"] = [entry["call_seq"]]
        out.append(closer)
        seq += 1
    if open_step is not None:
        out.append({"type": "step/end", "seq": seq, "time": when, "data": {"turn": open_turn, "step": open_step}})
        seq += 1
    out.append(
        {
            "type": "turn/end",
            "seq": seq,
            "time": when,
            "data": {"turn": open_turn, "reason": {"kind": "interrupted"}},
        }
    )
    return out
