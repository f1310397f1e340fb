"""dsh host: compose LLM agent hosts out of pip-installable plugins.

This top-level package is the toolkit's public API: everything a plugin or a custom host uses
is exported here, documented and typed. Modules below it are private and may change.

A custom host in a few lines::

    from dsh_host import Config, Host

    async with Host.start(Config.from_mapping({"host": {"plugins": ["session-reference"]}})) as host:
        agent = await host.open_agent(cwd="/tmp")
        result = await agent.submit("hello")
        await agent.close()
"""

from dsh_host.agent import (
    ABSENT,
    DROPPED,
    Agent,
    Allow,
    Block,
    CancelSignal,
    Composition,
    ContinuationDecision,
    Continue,
    PromptDecision,
    Status,
    Stop,
    Ticket,
    TurnResult,
    rebuild_request,
    render_error,
    request_json,
)
from dsh_host.agent.composition import ComposeError
from dsh_host.asyncs import abandon_on, ignore_outcome, resolve
from dsh_host.config import Config, load_config
from dsh_host.errors import ConfigError, DshError, PluginError
from dsh_host.hookspecs import hookimpl, hookspec
from dsh_host.host import Host
from dsh_host.jstext import (
    JS_WHITESPACE,
    escape_lone_surrogates,
    has_surrogate,
    iso_utc,
    join_surrogate_pairs,
    js_string,
    js_trim,
)
from dsh_host.models.assembler import AssembledMessage, StreamAssembler
from dsh_host.models.base import ModelAdapter, ModelFailure, ModelRequest, ToolSchema
from dsh_host.models.registry import ResolvedModel
from dsh_host.models.scripted import message_text, shorten_text, unanswered_messages
from dsh_host.query import SessionQuery, SessionRecord, TitleSnapshot
from dsh_host.services import Services
from dsh_host.session.check import LogInvariant, Violation, check_log
from dsh_host.session.events import (
    PROMPT_DELIMITER,
    Event,
    InvalidEvent,
    SessionHeader,
    SurfaceText,
    event_from_json,
    surface_text,
)
from dsh_host.session.jsonl import InvalidLog
from dsh_host.session.lossless import NotLosslessJson
from dsh_host.session.messages import derive_event_message
from dsh_host.session.request_header import canonical_header, header_equals
from dsh_host.session.session import Session
from dsh_host.session.snapshots import SurfaceSnapshot, SurfaceTexts
from dsh_host.session.surface import Surface, SurfaceError, plan
from dsh_host.settings import read_bool, read_float, read_int, read_str, reject_unknown, show
from dsh_host.sources.base import BodyScorer, SessionSource, SourceFileReport, SourceReadOnly
from dsh_host.sources.synthesis import SourceConversation, SourceMessage
from dsh_host.store.base import (
    CandidateRow,
    SearchCancelled,
    SessionNotFound,
    SessionRow,
    SessionStore,
    StoredTitle,
    StoreError,
)
from dsh_host.store.relevance import BodyTextScoring
from dsh_host.store.search import SearchQuery
from dsh_host.store.sqlite import SqliteSessionStore
from dsh_host.tools.base import Tool, ToolContext, ToolResult
from dsh_host.tui.file_search import AtToken
from dsh_host.tui.mentions import MentionCompletion
from dsh_host.tui.render import Transcript
from dsh_host.tui.render import card as transcript_card
from dsh_host.tui.render import error as transcript_error
from dsh_host.tui.render import notice as transcript_notice
from dsh_host.tui.terminal_text import display_inline_text, display_text, inert_json

__version__ = "0.1.0"

__all__ = [
    "ABSENT",
    "DROPPED",
    "JS_WHITESPACE",
    "PROMPT_DELIMITER",
    "Agent",
    "Allow",
    "AssembledMessage",
    "AtToken",
    "Block",
    "BodyScorer",
    "BodyTextScoring",
    "CancelSignal",
    "CandidateRow",
    "ComposeError",
    "Composition",
    "Config",
    "ConfigError",
    "ContinuationDecision",
    "Continue",
    "DshError",
    "Event",
    "Host",
    "InvalidEvent",
    "InvalidLog",
    "LogInvariant",
    "MentionCompletion",
    "ModelAdapter",
    "ModelFailure",
    "ModelRequest",
    "NotLosslessJson",
    "PluginError",
    "PromptDecision",
    "ResolvedModel",
    "SearchCancelled",
    "SearchQuery",
    "Services",
    "Session",
    "SessionHeader",
    "SessionNotFound",
    "SessionQuery",
    "SessionRecord",
    "SessionRow",
    "SessionSource",
    "SessionStore",
    "SourceConversation",
    "SourceFileReport",
    "SourceMessage",
    "SourceReadOnly",
    "SqliteSessionStore",
    "Status",
    "Stop",
    "StoreError",
    "StoredTitle",
    "StreamAssembler",
    "Surface",
    "SurfaceError",
    "SurfaceSnapshot",
    "SurfaceText",
    "SurfaceTexts",
    "Ticket",
    "TitleSnapshot",
    "Tool",
    "ToolContext",
    "ToolResult",
    "ToolSchema",
    "Transcript",
    "TurnResult",
    "Violation",
    "__version__",
    "abandon_on",
    "canonical_header",
    "check_log",
    "derive_event_message",
    "display_inline_text",
    "display_text",
    "escape_lone_surrogates",
    "event_from_json",
    "has_surrogate",
    "header_equals",
    "hookimpl",
    "hookspec",
    "ignore_outcome",
    "inert_json",
    "iso_utc",
    "join_surrogate_pairs",
    "js_string",
    "js_trim",
    "load_config",
    "message_text",
    "plan",
    "read_bool",
    "read_float",
    "read_int",
    "read_str",
    "rebuild_request",
    "reject_unknown",
    "render_error",
    "request_json",
    "resolve",
    "shorten_text",
    "show",
    "surface_text",
    "transcript_card",
    "transcript_error",
    "transcript_notice",
    "unanswered_messages",
]
