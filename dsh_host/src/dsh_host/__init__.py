"""dsh host: compose LLM agent hosts out of pip-installable plugins."""

from dsh_host.agent.decisions import ContinuationDecision, Continue, Stop
from dsh_host.errors import ConfigError, DshError, PluginError
from dsh_host.hookspecs import hookimpl, hookspec
from dsh_host.jstext import escape_lone_surrogates, has_surrogate, iso_utc, join_surrogate_pairs, js_string
from dsh_host.models.base import ModelFailure, ModelRequest
from dsh_host.session.check import LogInvariant, Violation, check_log
from dsh_host.session.events import InvalidEvent
from dsh_host.session.jsonl import InvalidLog
from dsh_host.session.lossless import NotLosslessJson
from dsh_host.session.surface import SurfaceError
from dsh_host.tui.file_search import AtToken
from dsh_host.tui.mentions import MentionCompletion
from dsh_host.tui.render import Transcript
from dsh_host.tui.render import card as transcript_card
from dsh_host.tui.render import error as transcript_error
from dsh_host.tui.render import notice as transcript_notice
from dsh_host.tui.terminal_text import display_inline_text, display_text, inert_json

__version__ = "0.1.0"

__all__ = [
    "AtToken",
    "ConfigError",
    "ContinuationDecision",
    "Continue",
    "DshError",
    "InvalidEvent",
    "InvalidLog",
    "LogInvariant",
    "MentionCompletion",
    "ModelFailure",
    "ModelRequest",
    "NotLosslessJson",
    "PluginError",
    "Stop",
    "SurfaceError",
    "Transcript",
    "Violation",
    "__version__",
    "check_log",
    "display_inline_text",
    "display_text",
    "escape_lone_surrogates",
    "has_surrogate",
    "hookimpl",
    "hookspec",
    "inert_json",
    "iso_utc",
    "join_surrogate_pairs",
    "js_string",
    "transcript_card",
    "transcript_error",
    "transcript_notice",
]
