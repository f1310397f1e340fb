"""dsh host: compose LLM agent hosts out of pip-installable plugins.

This package is the toolkit's public API: the host and its configuration, `hookimpl`, the agent
and its results, events and records, the store protocol, model and tool interfaces, errors, and
terminal-safe text. Helpers live in public sub-namespaces, each documented in docs/api.md:

- `dsh_host.log`: reading events, the surface fold, the messages and requests a log implies,
  the log check;
- `dsh_host.models`: model failures, stream assembly, the resolved model;
- `dsh_host.ui`: the terminal UI's types (transcript blocks, `@` completions, slash commands;
  loads rich);
- `dsh_host.text`: JavaScript's string conventions, and one-line text;
- `dsh_host.settings`: readers for a plugin's configuration table;
- `dsh_host.asyncs`: resolving hook results, abandoning work on a cancel signal;
- `dsh_host.hookspecs`: every hook, with the types of its arguments and results;
- `dsh_host.testing`: the pytest plugin for plugin and host authors.

Every other module below `dsh_host` is private and may change. Names are loaded on first use,
so `import dsh_host` alone loads neither the agent nor the terminal UI.

A custom host in a few lines::

    from dsh_host import Config, Host

    async with Host.start(Config.from_mapping({"host": {"plugins": ["session-reference"]}})) as host:
        agent = await host.open_agent(cwd="/tmp")
        result = await agent.submit("hello")
        await agent.close()
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING

from dsh_host.hookspecs import hookimpl

if TYPE_CHECKING:
    from dsh_host.agent.agent import Agent
    from dsh_host.agent.composition import ComposeError, Composition
    from dsh_host.agent.decisions import Allow, Block, Continue, Stop
    from dsh_host.agent.tickets import Ticket, TurnResult
    from dsh_host.config import Config, load_config
    from dsh_host.errors import ConfigError, DshError, PluginError
    from dsh_host.host import Host
    from dsh_host.models.base import ModelAdapter, ModelRequest
    from dsh_host.query import SessionQuery, SessionRecord, TitleSnapshot
    from dsh_host.services import Services
    from dsh_host.session.events import Event, SessionHeader, SurfaceText
    from dsh_host.session.session import Session
    from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts
    from dsh_host.sources.base import SessionSource
    from dsh_host.store.base import (
        CandidateRow,
        LeasingStore,
        QuickLeasingStore,
        SearchCancelled,
        SessionBusy,
        SessionLease,
        SessionNotFound,
        SessionRow,
        SessionStore,
        StoredTitle,
        StoreError,
    )
    from dsh_host.store.sqlite import SqliteSessionStore
    from dsh_host.terminal_text import display_inline_text, display_text, inert_json
    from dsh_host.tools.base import Tool, ToolContext, ToolResult

__version__ = "0.1.0"

_HOMES = {
    # the host and its configuration
    "Host": "dsh_host.host",
    "Config": "dsh_host.config",
    "load_config": "dsh_host.config",
    "Services": "dsh_host.services",
    # the agent and its results
    "Agent": "dsh_host.agent.agent",
    "Ticket": "dsh_host.agent.tickets",
    "TurnResult": "dsh_host.agent.tickets",
    "Composition": "dsh_host.agent.composition",
    "Allow": "dsh_host.agent.decisions",
    "Block": "dsh_host.agent.decisions",
    "Continue": "dsh_host.agent.decisions",
    "Stop": "dsh_host.agent.decisions",
    # events and records
    "Event": "dsh_host.session.events",
    "SessionHeader": "dsh_host.session.events",
    "SurfaceText": "dsh_host.session.events",
    "Session": "dsh_host.session.session",
    "SurfaceSnapshot": "dsh_host.session.snapshots",
    "SurfaceTexts": "dsh_host.session.snapshots",
    "SessionQuery": "dsh_host.query",
    "SessionRecord": "dsh_host.query",
    "TitleSnapshot": "dsh_host.query",
    # the store protocol
    "SessionStore": "dsh_host.store.base",
    "LeasingStore": "dsh_host.store.base",
    "SessionLease": "dsh_host.store.base",
    "QuickLeasingStore": "dsh_host.store.base",
    "SessionRow": "dsh_host.store.base",
    "CandidateRow": "dsh_host.store.base",
    "StoredTitle": "dsh_host.store.base",
    "SqliteSessionStore": "dsh_host.store.sqlite",
    "SessionSource": "dsh_host.sources.base",
    # model and tool interfaces
    "ModelAdapter": "dsh_host.models.base",
    "ModelRequest": "dsh_host.models.base",
    "Tool": "dsh_host.tools.base",
    "ToolContext": "dsh_host.tools.base",
    "ToolResult": "dsh_host.tools.base",
    # errors
    "DshError": "dsh_host.errors",
    "ConfigError": "dsh_host.errors",
    "PluginError": "dsh_host.errors",
    "StoreError": "dsh_host.store.base",
    "SessionNotFound": "dsh_host.store.base",
    "SessionBusy": "dsh_host.store.base",
    "SearchCancelled": "dsh_host.store.base",
    "ComposeError": "dsh_host.agent.composition",
    # terminal-safe text
    "display_text": "dsh_host.terminal_text",
    "display_inline_text": "dsh_host.terminal_text",
    "inert_json": "dsh_host.terminal_text",
}

# Names this package exported before the public surface was narrowed: each still works, with a
# DeprecationWarning naming its new home (or saying it is internal), until the next release.
_MOVED = {
    "hookspec": ("dsh_host.hookspecs", "hookspec"),
    "JS_WHITESPACE": ("dsh_host.text", "JS_WHITESPACE"),
    "escape_lone_surrogates": ("dsh_host.text", "escape_lone_surrogates"),
    "has_surrogate": ("dsh_host.text", "has_surrogate"),
    "iso_utc": ("dsh_host.text", "iso_utc"),
    "join_surrogate_pairs": ("dsh_host.text", "join_surrogate_pairs"),
    "js_string": ("dsh_host.text", "js_string"),
    "js_trim": ("dsh_host.text", "js_trim"),
    "shorten_text": ("dsh_host.text", "shorten_text"),
    "read_bool": ("dsh_host.settings", "read_bool"),
    "read_float": ("dsh_host.settings", "read_float"),
    "read_int": ("dsh_host.settings", "read_int"),
    "read_str": ("dsh_host.settings", "read_str"),
    "reject_unknown": ("dsh_host.settings", "reject_unknown"),
    "show": ("dsh_host.settings", "format_value"),
    "abandon_on": ("dsh_host.asyncs", "abandon_on"),
    "ignore_outcome": ("dsh_host.asyncs", "ignore_outcome"),
    "resolve": ("dsh_host.asyncs", "resolve"),
    "AssembledMessage": ("dsh_host.models", "AssembledMessage"),
    "ModelFailure": ("dsh_host.models", "ModelFailure"),
    "ResolvedModel": ("dsh_host.models", "ResolvedModel"),
    "StreamAssembler": ("dsh_host.models", "StreamAssembler"),
    "ToolSchema": ("dsh_host.models", "ToolSchema"),
    "message_text": ("dsh_host.models", "message_text"),
    "unanswered_messages": ("dsh_host.models", "unanswered_messages"),
    "PROMPT_DELIMITER": ("dsh_host.log", "PROMPT_DELIMITER"),
    "InvalidEvent": ("dsh_host.log", "InvalidEvent"),
    "InvalidLog": ("dsh_host.log", "InvalidLog"),
    "LogInvariant": ("dsh_host.log", "LogInvariant"),
    "NotLosslessJson": ("dsh_host.log", "NotLosslessJson"),
    "Surface": ("dsh_host.log", "Surface"),
    "SurfaceError": ("dsh_host.log", "SurfaceError"),
    "Violation": ("dsh_host.log", "Violation"),
    "canonical_header": ("dsh_host.log", "canonical_header"),
    "check_log": ("dsh_host.log", "check_log"),
    "derive_event_message": ("dsh_host.log", "derive_event_message"),
    "event_from_json": ("dsh_host.log", "event_from_json"),
    "header_equals": ("dsh_host.log", "header_equals"),
    "plan": ("dsh_host.log", "plan_transition"),
    "rebuild_request": ("dsh_host.log", "rebuild_request"),
    "request_json": ("dsh_host.log", "request_json"),
    "surface_text": ("dsh_host.log", "surface_text"),
    "AtToken": ("dsh_host.ui", "AtToken"),
    "MentionCompletion": ("dsh_host.ui", "MentionCompletion"),
    "Transcript": ("dsh_host.ui", "Transcript"),
    "transcript_card": ("dsh_host.ui", "card"),
    "transcript_error": ("dsh_host.ui", "error"),
    "transcript_notice": ("dsh_host.ui", "notice"),
}
_INTERNAL = {
    "ABSENT": "dsh_host.agent.inbox",
    "CancelSignal": "dsh_host.agent.cancel",
    "ContinuationDecision": "dsh_host.agent.decisions",
    "DROPPED": "dsh_host.agent.tickets",
    "PromptDecision": "dsh_host.agent.decisions",
    "Status": "dsh_host.agent.agent",
    "render_error": "dsh_host.agent.errors",
}

__all__ = [
    "Agent",
    "Allow",
    "Block",
    "CandidateRow",
    "ComposeError",
    "Composition",
    "Config",
    "ConfigError",
    "Continue",
    "DshError",
    "Event",
    "Host",
    "LeasingStore",
    "ModelAdapter",
    "ModelRequest",
    "PluginError",
    "QuickLeasingStore",
    "SearchCancelled",
    "Services",
    "Session",
    "SessionBusy",
    "SessionHeader",
    "SessionLease",
    "SessionNotFound",
    "SessionQuery",
    "SessionRecord",
    "SessionRow",
    "SessionSource",
    "SessionStore",
    "SqliteSessionStore",
    "Stop",
    "StoreError",
    "StoredTitle",
    "SurfaceSnapshot",
    "SurfaceText",
    "SurfaceTexts",
    "Ticket",
    "TitleSnapshot",
    "Tool",
    "ToolContext",
    "ToolResult",
    "TurnResult",
    "__version__",
    "display_inline_text",
    "display_text",
    "hookimpl",
    "inert_json",
    "load_config",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _MOVED:
        module, new_name = _MOVED[name]
        warnings.warn(f"dsh_host.{name} is deprecated: use {module}.{new_name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new_name)
    if name in _INTERNAL:
        warnings.warn(
            f"dsh_host.{name} is deprecated: it is internal and will be removed", DeprecationWarning, stacklevel=2
        )
        return getattr(importlib.import_module(_INTERNAL[name]), name)
    raise AttributeError(f"module 'dsh_host' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
