"""The host's own hook implementations, registered like any plugin's.

They provide the last-resort results of the waterfall hooks, the two built-in model adapters
and the embedded SQLite store. Optional built-in features (the read-only file tools) are
separate entry-point plugins instead, so configuration can leave them out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_host.agent.composition import Composition
from dsh_host.agent.decisions import Allow
from dsh_host.hookspecs import hookimpl
from dsh_host.settings import read_str, reject_unknown

SQLITE_FILE = "sessions.sqlite3"


@hookimpl(trylast=True)
def dsh_prompt_submit(agent, content, source, signal, contexts):
    """Default allow: the record's contexts become the additional contexts (none: no key)."""
    return Allow(additional_contexts=list(contexts)) if contexts else Allow()


@hookimpl(trylast=True)
def dsh_agent_request_error(agent, turn, step, error, failure, prior_failures, signal):
    """Without a recovery plugin, a failed request fails the turn."""
    return "fail"


# --- defaults of the agent's waterfalls (they run last: a plugin's result comes first) ----------


@hookimpl(trylast=True)
def dsh_agent_session_prefix(agent, prefix, signal):
    """No session prefix: the frozen empty list, unchanged."""
    return prefix


@hookimpl(trylast=True)
def dsh_agent_request(agent, turn, step, config, signal):
    """The seed config, unchanged: the agent's options, or the latest logged header's config."""
    return config


@hookimpl(trylast=True)
def dsh_agent_step_result(agent, turn, step, message, signal):
    """The assembled assistant message, unchanged."""
    return message


@hookimpl(trylast=True)
def dsh_agent_turn_continuation(agent, turn, default_decision, signal):
    """Another step after tool calls or late steering, else stop: the loop's default decision."""
    return default_decision


@hookimpl(trylast=True)
def dsh_compose_message(agent, text, signal):
    """Without a composing plugin, the text goes out as typed."""
    return Composition.text(text)


@hookimpl
def dsh_register_models(register):
    from dsh_host.models import openai, scripted

    register("scripted", scripted.create)
    register("openai", openai.create)


# The host's own commands, slash commands and transcript renderers go through the same hooks as a
# plugin's. `tryfirst` keeps them ahead of the plugins' (`/help` lists the host's commands
# first). Imports are deferred: a host that never builds a CLI or a UI never loads them.


@hookimpl(tryfirst=True)
def dsh_register_commands(cli):
    from dsh_host.cli import chat, demo, info, run, sessions

    for command in (info.plugins, info.config, sessions.sessions, run.run, demo.demo, chat.chat):
        cli.add_command(command)


@hookimpl(tryfirst=True)
def dsh_register_slash_commands(register):
    from dsh_host.tui.commands import BUILTIN_COMMANDS

    for name, help_text, handler in BUILTIN_COMMANDS:
        register(name, help_text, handler)


@hookimpl(tryfirst=True)
def dsh_register_renderers(register):
    from dsh_host.tui.render import HOST_RENDERERS

    for event_type, render in HOST_RENDERERS.items():
        register(event_type, render)


@hookimpl
def dsh_register_stores(register):
    register("sqlite", open_sqlite_store)


def open_sqlite_store(host: Any, table: dict[str, Any]) -> Any:
    """`[stores.sqlite]`: `path` (default `sessions.sqlite3` under the data dir).

    Indexing an older database for search on first open reports progress on `dsh.progress`.
    """
    from dsh_host.progress import progress_reporter
    from dsh_host.store.sqlite import SqliteSessionStore

    reject_unknown("stores.sqlite", table, ("path",))
    path = read_str("stores.sqlite", table, "path", "")
    return SqliteSessionStore.open(
        Path(path).expanduser() if path else host.data_dir / SQLITE_FILE,
        progress=progress_reporter("indexing sessions for search"),
    )
