"""The agent: inbox, loop, placement and request reconstruction.

`Agent` is the entry point: `submit` and `compose` for typed text; `send`, `steer` (each
returning a `Ticket`), `inject`, `cancel`, `dispose`, `close`, `wait_idle`, `status` and
`on_status`. `rebuild_request` recomputes any step's model request from the log.
"""

from dsh_host.agent.agent import Agent, Status
from dsh_host.agent.cancel import CancelSignal
from dsh_host.agent.composition import Composition
from dsh_host.agent.decisions import Allow, Block, ContinuationDecision, Continue, PromptDecision, Stop
from dsh_host.agent.errors import render_error
from dsh_host.agent.inbox import ABSENT, InboxRecord
from dsh_host.agent.reconstruct import rebuild_request, request_json
from dsh_host.agent.tickets import DROPPED, Ticket, TurnResult

__all__ = [
    "ABSENT",
    "DROPPED",
    "Agent",
    "Allow",
    "Block",
    "CancelSignal",
    "Composition",
    "ContinuationDecision",
    "Continue",
    "InboxRecord",
    "PromptDecision",
    "Status",
    "Stop",
    "Ticket",
    "TurnResult",
    "rebuild_request",
    "render_error",
    "request_json",
]
