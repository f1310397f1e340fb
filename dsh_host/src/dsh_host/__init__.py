"""dsh host: compose LLM agent hosts out of pip-installable plugins."""

from dsh_host.errors import ConfigError, DshError, PluginError
from dsh_host.hookspecs import hookimpl, hookspec
from dsh_host.jstext import js_string
from dsh_host.models.base import ModelFailure
from dsh_host.session.check import LogInvariant, Violation, check_log
from dsh_host.session.events import InvalidEvent
from dsh_host.session.jsonl import InvalidLog
from dsh_host.session.lossless import NotLosslessJson
from dsh_host.session.surface import SurfaceError

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DshError",
    "InvalidEvent",
    "InvalidLog",
    "LogInvariant",
    "ModelFailure",
    "NotLosslessJson",
    "PluginError",
    "SurfaceError",
    "Violation",
    "__version__",
    "check_log",
    "hookimpl",
    "hookspec",
    "js_string",
]
