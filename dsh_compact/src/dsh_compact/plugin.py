"""The `compact` plugin: mounts the compaction service and, with `auto`, its triggers.

Mounting validates `[plugins.compact]`, registers the `compact` service, and registers the
automatic triggers as a separate plugin object (only when `auto` is true), so a host with
`auto = false` never runs them. The plugin also adds `dsh compact SESSION_ID`, `/compact`, and
the compaction bracket's rules to `dsh sessions check`, shows `compact/end` in the transcript,
and marks its summary requests with a header.

Every `dsh` command mounts the plugin, so mounting loads only the configuration and the
service's shell; the compaction machinery, the commands, the log rules and the transcript's
rendering are imported by the hooks that use them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dsh_compact.config import load_compact_config
from dsh_compact.display import COMPACTION_HEADER
from dsh_compact.prune import ToolResultPruner
from dsh_compact.service import CompactionService
from dsh_compact.summarizer import PURPOSE, ModelSummarizer
from dsh_compact.targets import ModelTarget
from dsh_host import ConfigError, hookimpl

if TYPE_CHECKING:
    import click

    from dsh_compact.listeners import AutoCompaction
    from dsh_host import Host, ModelRequest, Session
    from dsh_host.log import LogInvariant
    from dsh_host.models import ResolvedModel
    from dsh_host.ui import EventRenderer, SlashCommandHandler

SERVICE = "compact"
_AUTO_PLUGIN_NAME = "compact.auto"

# The trigger object of each host this plugin is mounted on (one module serves every host).
_auto: weakref.WeakKeyDictionary[Host, AutoCompaction] = weakref.WeakKeyDictionary()


@hookimpl
def dsh_mount(host: Host, config: Mapping[str, Any]) -> None:
    """Validate `[plugins.compact]`, register the `compact` service and the automatic triggers."""
    settings = load_compact_config(config)

    def resolve(target: ModelTarget) -> ResolvedModel:
        return host.models.resolve(f"{target.provider}:{target.model}")

    def capacity(target: ModelTarget) -> int | None:
        try:
            adapter = host.models.adapter(target.provider)
        except ConfigError:
            return None
        window = getattr(adapter, "context_window", None)
        return window(target.model) if callable(window) else None

    def default_target() -> ModelTarget | None:
        from dsh_host.models import ModelUnavailable

        try:
            resolved = host.models.resolve()
        except ModelUnavailable as exc:
            # The configured model still names the target; summarizing with it fails, saying why,
            # and nothing stands in for it.
            resolved = exc.placeholder
        return ModelTarget.of(resolved.provider, resolved.model)

    async def flush(session: Session) -> None:
        # Only the host's live sessions are persisted; a detached session stays in memory.
        if host.sessions.get(session.id) is session:
            await host.sessions.flush(session)

    service = CompactionService(
        settings,
        summarizer=ModelSummarizer(settings, resolve),
        capacity=capacity,
        default_target=default_target,
        flush=flush,
        pruner=ToolResultPruner(settings.prune) if settings.prune is not None else None,
    )
    host.services.register(SERVICE, service)
    if settings.auto:
        from dsh_compact.listeners import AutoCompaction

        listener = AutoCompaction(service)
        host.pm.register(listener, name=_AUTO_PLUGIN_NAME)
        _auto[host] = listener


@hookimpl
def dsh_unmount(host: Host) -> None:
    """Remove the automatic triggers (the host removes the service itself)."""
    listener = _auto.pop(host, None)
    if listener is not None and host.pm.is_registered(listener):
        host.pm.unregister(listener)


@hookimpl
def dsh_register_commands(cli: click.Group) -> None:
    """Add `dsh compact SESSION_ID`."""
    from dsh_compact.cli import compact_command

    cli.add_command(compact_command)


@hookimpl
def dsh_register_slash_commands(register: Callable[[str, str, SlashCommandHandler], None]) -> None:
    """Add `/compact [RETAIN_TOKENS]` for the session of the terminal UI."""
    from dsh_compact.cli import compact_slash_command

    register("compact", "Compact the conversation now, keeping [RETAIN_TOKENS]", compact_slash_command)


@hookimpl
def dsh_log_invariants() -> Iterable[LogInvariant]:
    """The compaction bracket's rules (`dsh_compact.invariant`)."""
    from dsh_compact.invariant import check_compactions

    return (check_compactions,)


@hookimpl
def dsh_register_renderers(register: Callable[[str, EventRenderer], None]) -> None:
    """Show `compact/end` in the transcript (`compact/start` prints nothing)."""
    from dsh_compact.display import render_compact_end

    register("compact/end", render_compact_end)


@hookimpl
def dsh_model_request_headers(provider: str, request: ModelRequest) -> Mapping[str, str] | None:
    """Mark summary requests with `x-deepseek-harness-compact: 1`."""
    return {COMPACTION_HEADER: "1"} if request.purpose == PURPOSE else None


@hookimpl
def dsh_scripted_reply(request: ModelRequest) -> str | None:
    """The keyless model answers a summary request with a structured checkpoint."""
    from dsh_compact.scripted_reply import scripted_reply

    return scripted_reply(request, PURPOSE)
