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

from dsh_host.hookspecs import hookimpl as hookimpl

__version__ = "0.1.0"

_HOMES = {
    # the host and its configuration
    "Host": "dsh_host.host",
    "Config": "dsh_host.config",
    "load_config": "dsh_host.config",
    "Services": "dsh_host.services",
    "SessionRegistry": "dsh_host.live_sessions",
    # the agent and its results
    "Agent": "dsh_host.agent.agent",
    "AgentStatus": "dsh_host.agent.agent",
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
"""The public names (but `hookimpl` and `__version__`), each with the module that defines it: the
one list. `__all__` is made from it, and each name is imported from its module on first use.
A type checker reads the same names from the `TYPE_CHECKING` imports below, which a test
(`tests/test_public_api.py`) holds equal to this list."""

__all__ = sorted(["__version__", "hookimpl", *_HOMES])

if TYPE_CHECKING:
    from dsh_host.agent.agent import Agent as Agent
    from dsh_host.agent.agent import AgentStatus as AgentStatus
    from dsh_host.agent.composition import ComposeError as ComposeError
    from dsh_host.agent.composition import Composition as Composition
    from dsh_host.agent.decisions import Allow as Allow
    from dsh_host.agent.decisions import Block as Block
    from dsh_host.agent.decisions import Continue as Continue
    from dsh_host.agent.decisions import Stop as Stop
    from dsh_host.agent.tickets import Ticket as Ticket
    from dsh_host.agent.tickets import TurnResult as TurnResult
    from dsh_host.config import Config as Config
    from dsh_host.config import load_config as load_config
    from dsh_host.errors import ConfigError as ConfigError
    from dsh_host.errors import DshError as DshError
    from dsh_host.errors import PluginError as PluginError
    from dsh_host.host import Host as Host
    from dsh_host.live_sessions import SessionRegistry as SessionRegistry
    from dsh_host.models.base import ModelAdapter as ModelAdapter
    from dsh_host.models.base import ModelRequest as ModelRequest
    from dsh_host.query import SessionQuery as SessionQuery
    from dsh_host.query import SessionRecord as SessionRecord
    from dsh_host.query import TitleSnapshot as TitleSnapshot
    from dsh_host.services import Services as Services
    from dsh_host.session.events import Event as Event
    from dsh_host.session.events import SessionHeader as SessionHeader
    from dsh_host.session.events import SurfaceText as SurfaceText
    from dsh_host.session.session import Session as Session
    from dsh_host.session.snapshots import SurfaceSnapshot as SurfaceSnapshot
    from dsh_host.session.snapshots import SurfaceTexts as SurfaceTexts
    from dsh_host.sources.base import SessionSource as SessionSource
    from dsh_host.store.base import CandidateRow as CandidateRow
    from dsh_host.store.base import LeasingStore as LeasingStore
    from dsh_host.store.base import QuickLeasingStore as QuickLeasingStore
    from dsh_host.store.base import SearchCancelled as SearchCancelled
    from dsh_host.store.base import SessionBusy as SessionBusy
    from dsh_host.store.base import SessionLease as SessionLease
    from dsh_host.store.base import SessionNotFound as SessionNotFound
    from dsh_host.store.base import SessionRow as SessionRow
    from dsh_host.store.base import SessionStore as SessionStore
    from dsh_host.store.base import StoredTitle as StoredTitle
    from dsh_host.store.base import StoreError as StoreError
    from dsh_host.store.sqlite import SqliteSessionStore as SqliteSessionStore
    from dsh_host.terminal_text import display_inline_text as display_inline_text
    from dsh_host.terminal_text import display_text as display_text
    from dsh_host.terminal_text import inert_json as inert_json
    from dsh_host.tools.base import Tool as Tool
    from dsh_host.tools.base import ToolContext as ToolContext
    from dsh_host.tools.base import ToolResult as ToolResult

SHIMS_REMOVED_IN = "0.2.0"
"""The release that drops the deprecated names below (docs/api.md says so too)."""

_DEPRECATED: dict[str, tuple[str, str | None]] = {
    # Names this package exported before the public surface was narrowed, and where each went
    # (None: it was internal and has no public home). Each still works, with a DeprecationWarning,
    # until `SHIMS_REMOVED_IN`.
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
    "Status": ("dsh_host", "AgentStatus"),
    "ABSENT": ("dsh_host.agent.inbox", None),
    "CancelSignal": ("dsh_host.agent.cancel", None),
    "ContinuationDecision": ("dsh_host.agent.decisions", None),
    "DROPPED": ("dsh_host.agent.tickets", None),
    "PromptDecision": ("dsh_host.agent.decisions", None),
    "render_error": ("dsh_host.agent.errors", None),
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _DEPRECATED:
        module, new_name = _DEPRECATED[name]
        if new_name is None:
            why, new_name = "it is internal", name
        else:
            why = f"use {module}.{new_name}"
        warnings.warn(
            f"dsh_host.{name} is deprecated: {why}; it goes in dsh-host {SHIMS_REMOVED_IN}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), new_name)
    raise AttributeError(f"module 'dsh_host' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
