"""Every hook a dsh plugin can implement.

Plugins are pluggy plugins of project "dsh": modules (or objects) whose functions are marked with
`dsh_host.hookimpl`. The host's own features are registered through these same hooks
(`dsh_host.builtins`), so a third-party plugin can do anything a built-in one can.

Hooks the agent calls (`dsh_agent_*`, `dsh_prompt_submit`) may return awaitables: the agent awaits
whatever comes back, repeatedly, until it has a plain value. Hooks called at start-up
(`dsh_mount`, `dsh_register_*`) are synchronous: they validate and register, they do no I/O.
"""

from __future__ import annotations

from pluggy import HookimplMarker, HookspecMarker

hookspec = HookspecMarker("dsh")
hookimpl = HookimplMarker("dsh")


@hookspec
def dsh_mount(host, config):
    """Mount this plugin on `host` with its own configuration table.

    Called by the host once per mounted plugin, in the order `[host] plugins` names them, and
    only on that plugin (never on the others). `config` is the plugin's `[plugins.<name>]` table
    as a plain dict (empty when absent). The plugin validates it (raise `dsh_host.ConfigError`
    naming the table, key and value for a bad value) and registers its services with
    `host.services.register(name, service)`. Raising aborts start-up: the host unmounts every
    plugin mounted so far and reports the plugin's name and the exception. The result is ignored.
    """


@hookspec
def dsh_unmount(host):
    """Release what `dsh_mount` acquired.

    Called by the host at shutdown (and when a later plugin's mount fails), on each mounted
    plugin in reverse mount order. Services the plugin registered are removed by the host
    afterwards; the plugin only closes what it opened itself. The result is ignored.
    """


@hookspec
def dsh_register_commands(cli):
    """Add subcommands to the `dsh` command line.

    Called by the CLI after the plugins are mounted, on every mounted plugin. `cli` is the root
    `click.Group`; add commands or groups with `cli.add_command(...)`. The result is ignored.
    """


@hookspec
def dsh_register_models(register):
    """Register model adapters.

    Called once when the host builds its model registry. `register(name, factory)` adds an
    adapter under the provider `name` (the part before `:` in `[host] model`); `factory(host)`
    returns an object with `async def stream(request)` yielding stream-chunk dicts (see
    `dsh_host.models.base.ModelAdapter`). Registering a name twice is an error.
    """


@hookspec
def dsh_register_tools(register):
    """Register tools the model may call.

    Called once per agent when it starts. `register(tool)` adds a `dsh_host.tools.base.Tool`;
    two tools with the same name are an error. Tools run with the agent's session cwd.
    """


@hookspec
def dsh_register_slash_commands(register):
    """Register slash commands for the terminal UI.

    Called when the terminal UI starts, on every mounted plugin. `register(name, help, handler)`
    adds `/name`. `handler(ui, argument)` may return an awaitable; a string it returns (or
    resolves to) is shown to the user as a notice, and an exception as `/<name> failed: ...`.
    The hook's own result is ignored.
    """


@hookspec
def dsh_agent_queued(agent, content, info):
    """Observe a message entering the agent's inbox.

    Called by `Agent.send` and by `Agent.steer` while a turn runs, synchronously, after the
    record is frozen and queued. `content` and `info` (`source`, `contexts`, `steering`) are the
    frozen record's own values. Observation only: the result is ignored and an exception is
    logged and contained.
    """


@hookspec(firstresult=True)
def dsh_prompt_submit(agent, content, source, signal, contexts):
    """Decide whether a queued message becomes a prompt, and with which contexts.

    Called by the agent once per queued message it claims (never for steering), after
    `turn/start`. `content` and `source` are the frozen record's; `contexts` are the record's
    frozen contexts. Returns a `dsh_host.agent.PromptDecision`: `Allow(content=None,
    additional_contexts=None)` or `Block(reason)`.

    This is a waterfall: the host's own implementation runs last (`trylast`) and returns the
    default allow that carries the record's contexts. A plugin that blocks returns a `Block`
    from a plain implementation, which ends the chain. A plugin that rewrites wraps the chain
    with `wrapper=True`: `decision = yield` gives the downstream decision (possibly an
    awaitable), and what the wrapper returns replaces it. An `Allow` whose
    `additional_contexts` is None materialises no contexts, so a wrapper must carry the
    downstream contexts over unless it means to drop them.
    """


@hookspec
def dsh_agent_post_step(agent, turn, step, signal):
    """Run after a step's response, tool results, contexts and steering are durable.

    Called by the agent on every successful step, before `step/end`; each implementation is
    awaited in turn. Compaction uses it to relieve context pressure. An exception fails the
    turn. The result is ignored.
    """


@hookspec(firstresult=True)
def dsh_agent_request_error(agent, turn, step, error, failure, prior_failures, signal):
    """Decide what happens after a model request failed.

    Called by the agent after the failed step has closed, for adapter failures and error or
    aborted finishes. `failure` is the normalised failure dict (`message`, `code`, ...);
    `prior_failures` are the failures that already authorised a retry in this run of
    consecutive failures. Return `"retry"` to open a new step rebuilt from the log, or None to
    abstain; the host's last-resort implementation returns `"fail"`. An exception is logged
    and counts as `"fail"`. Abstaining must be synchronous: an awaitable result ends the
    chain, so an implementation that needs to await returns its final decision itself.
    """


# Log invariants (the log check of `dsh sessions check`)


@hookspec
def dsh_log_invariants():
    """Contribute the rules of this plugin's own event types to the log check.

    Called by `dsh sessions check` on every mounted plugin, each time it checks logs. Returns an
    iterable of `dsh_host.LogInvariant`s: pure functions `invariant(header, events)` that yield a
    `dsh_host.Violation(seq, rule, message)` for each broken rule, run after the host's own rules
    (`dsh_host.check_log`). A plugin checks only the event types it owns; a log without them
    passes. The results of all plugins are combined.
    """
