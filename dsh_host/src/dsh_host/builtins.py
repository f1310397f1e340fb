"""The host's own hook implementations, registered like any plugin's.

They provide the last-resort results of the waterfall hooks, the two built-in model adapters
and the embedded SQLite store. Optional built-in features (the read-only file tools) are
separate entry-point plugins instead, so configuration can leave them out. Every host
registers this module, so each hook imports what it returns: a command that runs no agent
loads none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from dsh_host.hookspecs import StoreFactory, hookimpl
from dsh_host.jsontypes import Json
from dsh_host.settings import read_str, reject_unknown

if TYPE_CHECKING:
    import asyncio

    import click

    from dsh_host.agent.agent import Agent
    from dsh_host.agent.composition import Composition
    from dsh_host.agent.decisions import Allow, Continue, Stop
    from dsh_host.host import Host
    from dsh_host.models.registry import AdapterFactory
    from dsh_host.store.base import SessionStore
    from dsh_host.tui.render import EventRenderer
    from dsh_host.tui.slash import SlashCommandHandler

SQLITE_FILE = "sessions.sqlite3"


@hookimpl(trylast=True)
def dsh_prompt_submit(
    agent: Agent, content: Sequence[Json], source: Json | None, signal: asyncio.Event, contexts: Sequence[Json]
) -> Allow:
    """Default allow: the record's contexts become the additional contexts (none: no key)."""
    from dsh_host.agent.decisions import Allow

    return Allow(additional_contexts=list(contexts)) if contexts else Allow()


@hookimpl(trylast=True)
def dsh_agent_request_error(
    agent: Agent,
    turn: int,
    step: int,
    error: BaseException,
    failure: Json,
    prior_failures: Sequence[Json],
    signal: asyncio.Event,
) -> Literal["fail"]:
    """Without a recovery plugin, a failed request fails the turn."""
    return "fail"


# The defaults of the agent's waterfalls: each returns what it was given.


@hookimpl(trylast=True)
def dsh_agent_session_prefix(agent: Agent, prefix: Sequence[Json], signal: asyncio.Event) -> Sequence[Json]:
    """No session prefix: the frozen empty list, unchanged."""
    return prefix


@hookimpl(trylast=True)
def dsh_agent_request(agent: Agent, turn: int, step: int, config: Json, signal: asyncio.Event) -> Json:
    """The seed config, unchanged: the agent's options, or the latest logged header's config."""
    return config


@hookimpl(trylast=True)
def dsh_agent_step_result(agent: Agent, turn: int, step: int, message: Json, signal: asyncio.Event) -> Json:
    """The assembled assistant message, unchanged."""
    return message


@hookimpl(trylast=True)
def dsh_agent_turn_continuation(
    agent: Agent, turn: int, default_decision: Continue | Stop, signal: asyncio.Event
) -> Continue | Stop:
    """Another step after tool calls or late steering, else stop: the loop's default decision."""
    return default_decision


@hookimpl(trylast=True)
def dsh_compose_message(agent: Agent, text: str, signal: asyncio.Event) -> Composition:
    """Without a composing plugin, the text goes out as typed."""
    from dsh_host.agent.composition import Composition

    return Composition.text(text)


@hookimpl
def dsh_register_models(register: Callable[[str, AdapterFactory], None]) -> None:
    from dsh_host.models import openai, scripted

    register("scripted", scripted.create)
    register("openai", openai.create)


# The host's own commands, slash commands and transcript renderers go through the same hooks as a
# plugin's. `tryfirst` keeps them ahead of the plugins' (`/help` lists the host's commands
# first). Imports are deferred: a host that never builds a CLI or a UI never loads them.


@hookimpl(tryfirst=True)
def dsh_register_commands(cli: click.Group) -> None:
    from dsh_host.cli import chat, demo, info, run, sessions

    for command in (info.plugins, info.config, sessions.sessions, run.run, demo.demo, chat.chat):
        cli.add_command(command)


@hookimpl(tryfirst=True)
def dsh_register_slash_commands(register: Callable[[str, str, SlashCommandHandler], None]) -> None:
    from dsh_host.tui.commands import BUILTIN_COMMANDS

    for name, help_text, handler in BUILTIN_COMMANDS:
        register(name, help_text, cast("SlashCommandHandler", handler))  # they run in the host's own chat only


@hookimpl(tryfirst=True)
def dsh_register_renderers(register: Callable[[str, EventRenderer], None]) -> None:
    from dsh_host.tui.render import HOST_RENDERERS

    for event_type, render in HOST_RENDERERS.items():
        register(event_type, render)


@hookimpl
def dsh_register_stores(register: Callable[[str, StoreFactory], None]) -> None:
    register("sqlite", open_sqlite_store)


def open_sqlite_store(host: Host, table: Mapping[str, Any]) -> SessionStore:
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
