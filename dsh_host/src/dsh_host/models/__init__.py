"""Model adapters (public namespace `dsh_host.models`): what a plugin needs beyond the adapter
protocol itself, which is exported from `dsh_host` (`ModelAdapter`, `ModelRequest`).

- `ModelFailure`: the error an adapter raises (or a stream's finish carries) for a failed call.
- `ToolSchema`: a tool as a request offers it to the model.
- `StreamAssembler` and `AssembledMessage`: fold an adapter's stream chunks into the message
  they spell, as the agent does (for a plugin that calls a model itself, as compaction does).
- `ResolvedModel` and `AdapterFactory`: what `host.models.resolve(...)` returns, and what
  `dsh_register_models` registers; `ModelUnavailable`: what it raises for a model that cannot
  run (its API key variable unset).
- `message_text` and `unanswered_messages`: read the messages of a request.

The adapters themselves (`scripted`, `openai`) and the registry are private modules.
"""

from dsh_host.models.assembler import AssembledMessage, StreamAssembler
from dsh_host.models.base import ModelFailure, ToolSchema
from dsh_host.models.messages import message_text, unanswered_messages
from dsh_host.models.registry import AdapterFactory, ModelUnavailable, ResolvedModel

__all__ = [
    "AdapterFactory",
    "AssembledMessage",
    "ModelFailure",
    "ModelUnavailable",
    "ResolvedModel",
    "StreamAssembler",
    "ToolSchema",
    "message_text",
    "unanswered_messages",
]
