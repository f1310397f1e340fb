"""Every hook a dsh plugin can implement (public namespace `dsh_host.hookspecs`).

Plugins are pluggy plugins of project "dsh": modules (or objects) whose functions are marked with
`dsh_host.hookimpl`. The host's own features are registered through these same hooks
(`dsh_host.builtins`), so a third-party plugin can do anything a built-in one can. An
implementation may take any subset of a hook's arguments, by name.

Hooks the agent calls (`dsh_agent_*`, `dsh_prompt_submit`) may return awaitables: the agent awaits
whatever comes back, repeatedly, until it has a plain value. Hooks called at start-up
(`dsh_mount`, `dsh_register_*`) are synchronous: they validate and register, they do no I/O.

The agent's hooks come in three modes. "Notification" hooks are called one implementation at a
time, each failure is logged and contained and the result ignored (an awaitable result is
awaited in the background, and the agent's disposal waits for it). "Serial" hooks are awaited
one implementation after the other; the first that returns anything but None or False ends the
chain. "Waterfall" hooks are `firstresult` hooks with a host default that runs last (`trylast`): a
plain implementation that returns a value short-circuits the rest, a `wrapper=True`
implementation gets the downstream result (possibly an awaitable) from `yield` and returns its
replacement. Serial and waterfall failures fail the turn they run in.

The annotations say what each hook receives and may return; `MaybeAwaitable[T]` is `T` or an
awaitable resolving to it. docs/hooks.md is generated from this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pluggy import HookimplMarker, HookspecMarker

# The JSON vocabulary lives in a leaf module every layer can import; plugins import it from here.
from dsh_host.jsontypes import Json, JsonValue, MaybeAwaitable

if TYPE_CHECKING:
    import asyncio

    import click

    from dsh_host.agent.agent import Agent
    from dsh_host.agent.composition import Composition
    from dsh_host.agent.decisions import Allow, Block, Continue, Stop
    from dsh_host.host import Host
    from dsh_host.models.base import ModelRequest
    from dsh_host.models.registry import AdapterFactory
    from dsh_host.session.check import LogInvariant
    from dsh_host.session.events import Event
    from dsh_host.session.session import Session
    from dsh_host.sources.base import SessionSource
    from dsh_host.store.base import SessionStore
    from dsh_host.tools.base import Tool
    from dsh_host.tui.mentions import CompletionSource
    from dsh_host.tui.render import ContextRenderer, EventRenderer
    from dsh_host.tui.slash import SlashCommandHandler

__all__ = [
    "Json",
    "JsonValue",
    "MaybeAwaitable",
    "RegisterCompletion",
    "SourceFactory",
    "StoreFactory",
    "hookimpl",
    "hookspec",
]

hookspec = HookspecMarker("dsh")
"""Marks a hook specification of project `dsh` (used in this module only)."""

hookimpl = HookimplMarker("dsh")
"""Marks a plugin's hook implementation: `@hookimpl`, `@hookimpl(tryfirst=True)`,
`@hookimpl(wrapper=True)` (exported as `dsh_host.hookimpl`)."""

StoreFactory = Callable[["Host", dict[str, Any]], "SessionStore"]
"""`factory(host, table)`: opens the store `dsh_register_stores` registered, from its table."""

SourceFactory = Callable[["Host", dict[str, Any]], "SessionSource"]
"""`factory(host, table)`: opens the source `dsh_register_session_sources` registered, from its table."""


class RegisterCompletion(Protocol):
    """The `register` of `dsh_register_completions`: `register(complete, hint=None)`."""

    def __call__(self, complete: CompletionSource, hint: str | None = None) -> None: ...


@hookspec
def dsh_mount(host: Host, config: Mapping[str, Any]) -> None:
    """Mount this plugin on `host` with its own configuration table.

    Called by the host once per mounted plugin, in the order `[host] plugins` names them, and
    only on that plugin (never on the others). `config` is the plugin's `[plugins.<name>]` table
    as a plain dict (empty when absent). The plugin validates it (raise `dsh_host.ConfigError`
    naming the table, key and value for a bad value) and registers its services with
    `host.services.register(name, service)`. Raising aborts start-up: the host unmounts every
    plugin mounted so far and reports the plugin's name and the exception. The result is ignored.
    """


@hookspec
def dsh_unmount(host: Host) -> None:
    """Release what `dsh_mount` acquired.

    Called by the host at shutdown (and when a later plugin's mount fails), on each mounted
    plugin in reverse mount order. Services the plugin registered are removed by the host
    afterwards; the plugin only closes what it opened itself. The result is ignored.
    """


@hookspec
def dsh_register_commands(cli: click.Group) -> None:
    """Add subcommands to the `dsh` command line.

    Called by the CLI after the plugins are mounted, on every mounted plugin. `cli` is the root
    `click.Group`; add commands or groups with `cli.add_command(...)`. The result is ignored.
    """


@hookspec
def dsh_register_models(register: Callable[[str, AdapterFactory], None]) -> None:
    """Register model adapters.

    Called once when the host builds its model registry. `register(name, factory)` adds an
    adapter under the provider `name` (the part before `:` in `[host] model`); `factory(host)`
    returns an object with `async def stream(request)` yielding stream-chunk dicts (see
    `dsh_host.ModelAdapter`). Registering a name twice is an error.
    """


@hookspec
def dsh_register_tools(register: Callable[[Tool], None]) -> None:
    """Register tools the model may call.

    Called once per agent when it starts. `register(tool)` adds a `dsh_host.Tool`;
    two tools with the same name are an error. Tools run with the agent's session cwd.
    """


@hookspec
def dsh_register_slash_commands(register: Callable[[str, str, SlashCommandHandler], None]) -> None:
    """Register slash commands for the terminal UI.

    Called when the terminal UI starts, on every mounted plugin. `register(name, help, handler)`
    adds `/name`. `handler(ui, argument)` may return an awaitable; a string it returns (or
    resolves to) is shown to the user as a notice, and an exception as `/<name> failed: ...`.
    The hook's own result is ignored.
    """


@hookspec
def dsh_agent_queued(agent: Agent, content: Sequence[Json], info: Json) -> None:
    """Observe a message entering the agent's inbox.

    Called by `Agent.send` and by `Agent.steer` while a turn runs, synchronously, after the
    record is frozen and queued. `content` and `info` (`source`, `contexts`, `steering`) are the
    frozen record's own values. Observation only: the result is ignored and an exception is
    logged and contained.
    """


@hookspec(firstresult=True)
def dsh_prompt_submit(
    agent: Agent, content: Sequence[Json], source: Json | None, signal: asyncio.Event, contexts: Sequence[Json]
) -> MaybeAwaitable[Allow | Block] | None:
    """Decide whether a queued message becomes a prompt, and with which contexts.

    Called by the agent once per queued message it claims (never for steering), after
    `turn/start`. `content` and `source` are the frozen record's; `contexts` are the record's
    frozen contexts. Returns `dsh_host.Allow(content=None, additional_contexts=None)` or
    `dsh_host.Block(reason)`.

    This is a waterfall: the host's own implementation runs last (`trylast`) and returns the
    default allow that carries the record's contexts. A plugin that blocks returns a `Block`
    from a plain implementation, which ends the chain. A plugin that rewrites wraps the chain
    with `wrapper=True`: `decision = yield` gives the downstream decision (possibly an
    awaitable), and what the wrapper returns replaces it. An `Allow` whose
    `additional_contexts` is None materialises no contexts, so a wrapper must carry the
    downstream contexts over unless it means to drop them.
    """


@hookspec
def dsh_agent_post_step(agent: Agent, turn: int, step: int, signal: asyncio.Event) -> MaybeAwaitable[object]:
    """Run after a step's response, tool results, contexts and steering are durable.

    Called by the agent on every successful step, before `step/end`. Serial: implementations
    are awaited one after the other and the first returning anything but None or False ends
    the chain; the result is otherwise ignored. Compaction uses it to relieve context
    pressure. An exception fails the turn.
    """


@hookspec(firstresult=True)
def dsh_agent_request_error(
    agent: Agent,
    turn: int,
    step: int,
    error: BaseException,
    failure: Json,
    prior_failures: Sequence[Json],
    signal: asyncio.Event,
) -> MaybeAwaitable[Literal["retry", "fail"]] | None:
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
def dsh_log_invariants() -> Iterable[LogInvariant]:
    """Contribute the rules of this plugin's own event types to the log check.

    Called by `dsh sessions check` on every mounted plugin, each time it checks logs. Returns an
    iterable of `dsh_host.log.LogInvariant`s: pure functions `invariant(header, events)` run
    after the host's own rules (`dsh_host.log.check_log`). Each yields a
    `dsh_host.log.Violation(seq, rule, message)` for each broken rule (the check fails), and may
    yield a `dsh_host.log.Note(seq, rule, message)` for something worth knowing about a log that
    breaks no rule, such as a shape that reads fine but cannot be resumed (listed; the check
    fails on it only under `--strict`). A plugin checks only the event types it owns; a log
    without them passes. The results of all plugins are combined.
    """


# Agent lifecycle, step and turn hooks.


@hookspec
def dsh_agent_created(agent: Agent) -> MaybeAwaitable[None]:
    """Observe an agent being built.

    Called by `Agent` once, at the end of its construction, before `dsh_agent_session_start`
    and before it can run a turn. Notification: the result is ignored and an exception is
    logged and contained.
    """


@hookspec
def dsh_agent_session_start(agent: Agent, source: Literal["startup", "resume"]) -> MaybeAwaitable[None]:
    """Observe an agent starting on its session; the first point to `agent.inject` seed context.

    Called by `Agent` once, right after `dsh_agent_created`. `source` is `"startup"` for a
    session with an empty log and `"resume"` for one that already has events. Notification: the
    result is ignored and an exception is logged and contained.
    """


@hookspec
def dsh_agent_status(agent: Agent, status: Literal["idle", "running", "disposed"]) -> MaybeAwaitable[None]:
    """Observe an agent's status change: `"running"`, `"idle"` or `"disposed"`.

    Called by the agent on real transitions only (never twice in a row with the same status,
    nothing after `"disposed"`), after its `on_status` listeners and after idle waiters were
    released. `send` does not set `"running"` synchronously: the driver does when it claims the
    message. Notification: the result is ignored and an exception is logged and contained.
    """


@hookspec
def dsh_agent_cancel_requested(agent: Agent, cause: Json) -> MaybeAwaitable[None]:
    """Observe an effective cancel, before the inbox is cleared and the turn is interrupted.

    Called by `Agent.cancel` when it has something to cancel (a turn running, or messages
    queued); `cause` is the frozen `{kind: 'user' | 'parent'}`. It cannot veto: a message a
    listener sends from here is cleared by the same cancel. Notification: the result is ignored
    and an exception is logged and contained.
    """


@hookspec
def dsh_agent_pre_step(agent: Agent, turn: int, step: int, signal: asyncio.Event) -> MaybeAwaitable[object]:
    """Run before a step's request is built; what it appends is in this step's request.

    Called by the agent at the start of every step (`step` is the number the step will have),
    after steering was written and the session prefix composed, before the messages are taken
    from the log and before `step/start`. Compaction of the surface belongs here or in
    `dsh_agent_post_step`. Serial: implementations are awaited one after the other and the
    first returning anything but None or False ends the chain; the result is otherwise
    ignored. An exception fails the turn with the pending step number (no `step/start` was
    written for it).
    """


@hookspec(firstresult=True)
def dsh_agent_session_prefix(
    agent: Agent, prefix: Sequence[Json], signal: asyncio.Event
) -> MaybeAwaitable[Sequence[Json]] | None:
    """Compose the messages placed before all history in every request of this agent.

    Called by the agent once, on the first step of its first turn that gets that far (again on
    a later turn if that composition was interrupted). `prefix` is the frozen empty list the
    host default returns unchanged. Returns a list of model messages (`{role, content}`); it is
    frozen, kept for the agent's lifetime and recorded only in `request/header.messagePrefix`,
    so the request stays a function of the log. Waterfall: a plain implementation returning a
    list decides, a wrapper adjusts the downstream list.
    """


@hookspec(firstresult=True)
def dsh_agent_request(
    agent: Agent, turn: int, step: int, config: Json, signal: asyncio.Event
) -> MaybeAwaitable[Json] | None:
    """Choose the model call configuration of one request.

    Called by the agent after `step/start`, before the request header is recorded. `config` is
    a frozen copy of the seed: on the agent's first request `{provider, model}` from the
    agent's options, later the config of the latest logged `request/header`. Returns the
    config to use (`provider`, `model`, and optionally `temperature`, `maxTokens`, `stop`); the
    host default returns `config`. The result is logged in the request header (a `change`
    header when it differs), and a provider other than the agent's is routed through
    `host.models`. It cannot touch the messages: an `inject` from here joins the next request.
    Waterfall: a plain implementation returning a config decides, a wrapper adjusts the
    downstream one. A result without a provider or model fails the turn.
    """


@hookspec(firstresult=True)
def dsh_agent_step_result(
    agent: Agent, turn: int, step: int, message: Json, signal: asyncio.Event
) -> MaybeAwaitable[Json] | None:
    """Post-process the assistant message of a step before it is logged and its tools run.

    Called by the agent after the model stream finished successfully. `message` is the frozen
    assembled `{role: 'assistant', content}`; the host default returns it unchanged. Returns a
    message whose `content` is logged as `assistant/message` (any change drops the replay
    state; on a `max-tokens` finish tool calls are stripped before and after). Waterfall: a
    plain implementation returning a message decides, a wrapper adjusts the downstream one. An
    exception fails the turn, after an `assistant/message` with empty content was logged.
    """


@hookspec(firstresult=True)
def dsh_agent_turn_continuation(
    agent: Agent, turn: int, default_decision: Continue | Stop, signal: asyncio.Event
) -> MaybeAwaitable[Continue | Stop] | None:
    """Decide whether the turn runs another step.

    Called by the agent after each successful step's `step/end`. `default_decision` is
    `Continue()` when the step had tool calls or steering was written after the response, else
    `Stop()`; the host default returns it. Returns `dsh_host.Continue(content=None,
    source=None)` (with `content`, the loop adds it as steering first) or `dsh_host.Stop()`.
    Pending steering turns a stop into another step anyway. Waterfall: a plain implementation
    returning a decision decides, a wrapper adjusts the downstream one.
    """


@hookspec
def dsh_agent_turn_stop(agent: Agent, turn: int, signal: asyncio.Event) -> MaybeAwaitable[object]:
    """Stop the turn for good after this step, whatever the continuation decided.

    Called by the agent after every successful step, once the continuation is decided. Serial:
    the first implementation returning anything but None or False (say `Stop()`) ends the chain
    and makes the stop terminal: the turn ends after this step and every steering message, now
    or until the turn is flushed, is discarded; queued messages still run. None abstains.
    """


@hookspec
def dsh_agent_error(agent: Agent, turn: int, step: int, error: BaseException) -> MaybeAwaitable[None]:
    """Observe a failure as it happens: the exception and where it happened.

    Called by the agent when a turn fails (`step` is the failing step, 0 for prompt admission),
    when a turn could not even start (`step` 0), and when the flush after a turn or after an
    idle injection (`step` 0) fails. The failure is also in the log where it has a durable form
    (`turn/end` reason `error`). Notification: the result is ignored and an exception is logged
    and contained.
    """


@hookspec
def dsh_agent_disposed(agent: Agent) -> MaybeAwaitable[None]:
    """Observe an agent that is gone for good.

    Called by `Agent.dispose` once, after the driver stopped and the agent's background work
    settled, as the last thing the agent emits. Notification: the result is ignored and an
    exception is logged and contained.
    """


@hookspec
def dsh_session_event(host: Host, session: Session, event: Event) -> MaybeAwaitable[None]:
    """Observe every event appended to the session of an agent, after it is committed.

    Called by the agent's session right after each append (the event is in the log and cannot
    be undone), from the agent's construction until its disposal; once per event, however many
    agents of the host share the session (the first of them still attached publishes). `host`
    is the host the agent runs on: a plugin that keeps state per host (a process may run
    several) keeps it in a service it registered on that host in `dsh_mount` and finds it with
    `host.services.get(name)`. An implementation must not append to the session itself.
    Notification: the result is ignored and an exception is logged and contained; when no
    plugin implements this hook, appends publish nothing (the agent does not even listen to its
    session). A plugin registered while the agent lives sees the events appended from its
    registration on.
    """


# What plugins own in the terminal UI and in model requests.


@hookspec
def dsh_register_renderers(register: Callable[[str, EventRenderer], None]) -> None:
    """Register how logged events of a type look in the terminal transcript.

    Called once per transcript (the chat UI when it starts, `dsh demo` when it prints a turn),
    on every registered plugin; the host registers its own event types (messages, tool calls,
    turn ends) through this hook too. `register(event_type, render)` adds the renderer of
    `event_type`; `render(data, transcript)` gets the event's data mapping and the
    `dsh_host.ui.Transcript` (for `transcript.render_context(context)`) and returns a list of rich
    renderables, empty to print nothing. Every string taken from the event must pass
    `dsh_host.display_text` and be wrapped in `rich.text.Text`, never markup. An event type
    nobody registered prints nothing; registering a type twice is an error. The hook's own
    result is ignored.
    """


@hookspec
def dsh_register_context_renderers(register: Callable[[str, ContextRenderer], None]) -> None:
    """Register how contexts of a kind look in the terminal transcript.

    Called once per transcript, on every registered plugin. `register(kind, render)` handles
    the contexts whose `meta.kind` is `kind` (a prompt-prefix context baked into a user or
    steering message, or a separate `context/message`); `render(meta)` returns one rich
    renderable, or None when `meta` is not a valid one of its kind. A context nobody renders
    shows as the host's default: nothing for a prefix context (its baked text is never shown),
    a dim `Context · <source>` block for a separate context message. Registering a kind twice
    is an error. The hook's own result is ignored.
    """


@hookspec
def dsh_register_completions(host: Host, register: RegisterCompletion) -> None:
    """Register sources of `@` mention completions for the terminal UI's editor.

    Called once when the terminal UI starts on `host`, on every registered plugin (a plugin
    finds its own services on `host`). `register(complete, hint=None)` adds a source:
    `async complete(agent, token, signal)` gets the chat's current agent, the
    `dsh_host.ui.AtToken` ending at the cursor and an `asyncio.Event` set when typing moves on,
    and returns a list of `dsh_host.ui.MentionCompletion`; `hint` is the line `/help` shows for
    the syntax (`@name mentions another session`). The editor offers the host's file matches
    first, then every source's items in registration order; a source that fails or is
    abandoned offers nothing. Items marked `pending` (the source is still gathering, such as
    sessions being indexed) lead the menu, and while the last answer holds one and the text at
    the cursor stays as it is (Escape closes the menu for good), the menu asks every source
    again every half second by itself, with no keystroke, until none says `pending`. The
    hook's own result is ignored.
    """


@hookspec
def dsh_model_request_headers(provider: str, request: ModelRequest) -> Mapping[str, str] | None:
    """Add HTTP headers to one model request.

    Called by HTTP model adapters (the OpenAI-compatible `openai` one) once per request, just
    before it is sent, on every registered plugin. `provider` is the adapter's provider name
    and `request` the `dsh_host.ModelRequest` (its `purpose` says what the call is for:
    `"compaction"` for a summary). Return a mapping of header name to value, or None to add
    nothing; the mappings are merged in call order, and the adapter's own headers
    (authorization, content type) always win.
    """


# Stores and message composition.


@hookspec
def dsh_register_stores(register: Callable[[str, StoreFactory], None]) -> None:
    """Register session stores.

    Called once by the host when it first needs its store, on every registered plugin.
    `register(name, factory)` adds a store under `name` (the value of `[host] store`);
    `factory(host, table)` opens and returns a `dsh_host.SessionStore`, where `table` is the
    `[stores.<name>]` configuration table as a plain dict (empty when absent): validate it and
    raise `dsh_host.ConfigError` naming the table, key and value for a bad one, or
    `dsh_host.StoreError` when the store cannot be opened. Registering a name twice is an
    error. The host's own `sqlite` store is registered through this hook. The result is ignored.
    """


@hookspec
def dsh_register_session_sources(register: Callable[[str, SourceFactory], None]) -> None:
    """Register read-only session sources: the sessions of other agents, read in place.

    Called once by the host when it first needs its sources (a listing, a search, a read of a
    source's session), on every mounted plugin. `register(name, factory)` adds a source under
    `name`, which prefixes the ids of its sessions (`<name>:<the agent's own id>`); `factory(host,
    table)` opens and returns a `dsh_host.SessionSource`, where `table` is the `[sources.<name>]`
    configuration table as a plain dict (empty when absent): validate it and raise
    `dsh_host.ConfigError` naming the table, key and value for a bad one. A name must be
    non-empty and hold no `:`; registering a name twice is an error. A source answers the read
    half of the store protocol only: the host refuses every write, import, compaction or delete
    of its sessions with a `dsh_host.sources.SourceReadOnly` line. The result is ignored.
    """


@hookspec(firstresult=True)
def dsh_compose_message(agent: Agent, text: str, signal: asyncio.Event) -> MaybeAwaitable[Composition] | None:
    """Turn the text a person typed into the message an agent is sent.

    Called by `Agent.compose` (and so by `Agent.submit`, `dsh run` and the terminal UI) once
    per submitted text, before anything is queued. Return a `dsh_host.Composition` (content
    blocks and the contexts that ride with them), an awaitable resolving to one, or None to
    abstain; abstaining must be synchronous, since an awaitable ends the chain. The host's
    last-resort implementation returns the text as one text block with no contexts. `signal`
    is an `asyncio.Event` set when the caller abandons the composition (the person pressed
    Ctrl+C, the editor moved on): stop waiting then. Raise a `dsh_host.DshError` whose message
    is the one line to show and whose `code` names the failure; nothing is sent.
    """


@hookspec(firstresult=True)
def dsh_scripted_reply(request: ModelRequest) -> str | None:
    """Answer a request to the keyless `scripted` model in its plain (script-less) mode.

    Called by the scripted model once per request it answers without a script, before its
    own echo of the user's request. `request` is the `dsh_host.ModelRequest`. Return the reply
    text for a request this plugin recognises (compaction answers its summary requests with a
    structured checkpoint; session-reference acknowledges a referenced-session snapshot), or
    None to abstain; the first text wins and becomes one text block.
    """


# What plugins add to the web view (`dsh web`).


@hookspec
def dsh_web_session_panels(host: Host, session_id: str) -> MaybeAwaitable[Sequence[tuple[str, str]] | None]:
    """Add panels to `dsh web`'s page of a session: a plugin's own view of it.

    Called by the web view once per page of the session `session_id` it renders (its
    conversation, its log, its preview), on the event loop that serves the page. Return
    `(title, text)` pairs, or an awaitable resolving to them, or None to add nothing (compaction
    could show what each of its checkpoints folded away). Each panel is shown folded under the
    session's heading, its title as the fold's label and its text as preformatted text: both
    are escaped and their control and bidirectional characters made visible, so a panel can
    never add markup or script to the page. Read sessions through `host.services.session_query`
    (never block the loop: its methods are coroutines). An exception is logged and the page is
    shown without that plugin's panels.
    """
