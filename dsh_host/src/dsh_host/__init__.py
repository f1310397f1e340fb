"""dsh host: compose LLM agent hosts out of pip-installable plugins."""

from dsh_host.errors import ConfigError, DshError, PluginError
from dsh_host.hookspecs import hookimpl, hookspec

__version__ = "0.1.0"

__all__ = ["ConfigError", "DshError", "PluginError", "__version__", "hookimpl", "hookspec"]
