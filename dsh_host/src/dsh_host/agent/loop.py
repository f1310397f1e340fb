"""One turn of the agent loop: prompt admission, placement, steps, tool batches.

A turn is opened by `turn/start` and owes exactly one `turn/end`; every `step/start` it writes
owes exactly one `step/end`. Between them the turn checks its cancel signal at fixed
checkpoints, so an interruption always lands between two whole events and the log stays
balanced. Each model request is built from the log: the messages derived from the surface just
before `step/start`, and the latest `request/header`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from dsh_host.agent.cancel import CancelSignal, interruption_reason
from dsh_host.agent.decisions import Block, Continue, Stop
from dsh_host.agent.dispatch import serial, waterfall
from dsh_host.agent.errors import error_code, error_reason, failure_reason, render_error
from dsh_host.agent.inbox import ABSENT, USER_SOURCE, Inbox, InboxRecord, as_content
from dsh_host.agent.placement import context_message, place
from dsh_host.agent.tickets import Ticket, turn_result
from dsh_host.asyncs import abandon_on, resolve
from dsh_host.models.assembler import AssembledMessage, StreamAssembler
from dsh_host.models.base import ModelAdapter, ModelFailure, ModelRequest
from dsh_host.session.events import Event
from dsh_host.session.frozen import FrozenDict, FrozenList, frozen_loads
from dsh_host.session.lossless import NotLosslessJson, canonical_text
from dsh_host.session.request_header import canonical_header, header_equals
from dsh_host.session.session import Session
from dsh_host.tools.base import ToolContext, ToolResult

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.agent.ports import TurnOwner
    from dsh_host.jsontypes import Json, JsonValue

log = logging.getLogger("dsh.agent")

CONTEXT_SNAPSHOT_ERROR = "agent context must be losslessly JSON-serializable"
NO_ROUTE_ERROR = (
    'agent "{id}" has no provider/model: set the agent\'s provider and model '
    "or supply both via the agent/request waterfall (dsh_agent_request)"
)
COMPLETED = FrozenDict(kind="completed")
_TEXT_DELTAS = frozenset({"text-delta", "reasoning-delta"})
MAX_TOKENS = FrozenDict(kind="max-tokens")


class TurnInterrupted(Exception):
    """The turn's signal was set at a checkpoint (internal: becomes `aborted` or `disposed`)."""


class ModelRequestFailed(Exception):
    """The model request failed for good: an adapter failure, or an error/aborted finish."""

    def __init__(self, error: BaseException, failure: Json) -> None:
        super().__init__(str(error))
        self.error = error
        self.failure = failure

    @classmethod
    def from_error(cls, error: ModelFailure) -> ModelRequestFailed:
        return cls(error, frozen_loads(canonical_text(error.to_json())))

    @classmethod
    def from_finish(cls, finish: Json) -> ModelRequestFailed:
        failure = finish.get("failure")
        if not isinstance(failure, Mapping):
            failure = FrozenDict(message=f"model stream finished with {finish.get('kind')}", code="UNKNOWN")
        return cls(ModelFailure(str(failure.get("message", "")), str(failure.get("code", ""))), failure)


class RequestHeaderLog:
    """Header logging of one agent: a full snapshot first, then only changes.

    The first request an agent sends logs its header with reason `initial` (or `resume` when the
    log already holds one, for a resumed or seeded session); later requests log a `change` only
    when the header differs from the latest logged one. It also keeps the agent's session
    prefix, composed once (`dsh_agent_session_prefix`) and recorded in every header.
    """

    def __init__(self) -> None:
        self._logged = False
        self.prefix: FrozenList | None = None  # None until a composition completed

    def seed_config(self, session: Session, provider: str, model: str) -> FrozenDict:
        """The config `dsh_agent_request` starts from, frozen and detached.

        Until this agent logged a header: its own `provider` and `model`; then the config of the
        latest logged header.
        """
        latest = session.request_header() if self._logged else None
        if latest is None:
            return FrozenDict(provider=provider or "", model=model or "")
        return FrozenDict(latest["config"])

    def record(self, session: Session, header: Json) -> Json:
        """Log `header` if needed; returns the logged (frozen, canonical) header now in force."""
        latest = session.request_header()
        if not self._logged:
            reason = "initial" if latest is None else "resume"
        elif latest is not None and header_equals(header, latest):
            return latest
        else:
            reason = "change"
        session.append("request/header", {"header": header, "reason": reason})
        self._logged = True
        return cast("Json", session.request_header())  # just appended


@dataclass(frozen=True)
class StepOutcome:
    """What a successful step leaves for the continuation decision."""

    tool_calls: bool
    max_tokens: bool


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result fields, and the contexts it asks to add after the batch."""

    content: JsonValue
    is_error: bool = False
    error: Mapping[str, str] | None = None
    contexts: tuple[Json, ...] = ()

    @classmethod
    def failed(cls, message: str, name: str, code: str) -> ToolOutcome:
        return cls(
            content=[{"type": "text", "text": f"Error: {message}"}],
            is_error=True,
            error={"name": name, "code": code},
        )


ABORTED_BEFORE_DISPATCH = ToolOutcome.failed(
    "tool call aborted before dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH"
)


@dataclass(frozen=True)
class _Dispatched:
    call_seq: int
    outcome: ToolOutcome


class Turn:
    """One turn of an agent, from `turn/start` to `turn/end` and its flush.

    The driver runs it as `reason = await turn.run(record)`, retires the turn's cancel owner,
    then `await turn.close(reason)`; `stopped` then tells whether `dsh_agent_turn_stop` made the
    stop terminal (late steering is discarded, not queued). `inject` asks `batch_active` to know
    whether a context must wait for the end of the running tool batch.
    """

    def __init__(
        self, agent: TurnOwner, number: int, signal: CancelSignal, inbox: Inbox, headers: RequestHeaderLog
    ) -> None:
        self.agent = agent
        self.session = agent.session
        self.number = number
        self.signal = signal
        self.step = 0
        self.stopped = False
        self._inbox = inbox
        self._headers = headers
        self._step_open = False
        self._deferred: list[Json] | None = None
        self.first_seq = self.session.seq
        self.tickets: list[Ticket] = []
        """The tickets of the messages this turn wrote (its prompt and the steering it took)."""

    @property
    def batch_active(self) -> bool:
        """True while a tool batch runs: contexts then wait until all its results are logged."""
        return self._deferred is not None

    def defer(self, context: Json) -> None:
        """Queue a frozen context for after the running batch (FIFO with the tools' contexts)."""
        if self._deferred is None:
            raise RuntimeError("no tool batch is running")
        self._deferred.append(context)

    async def run(self, record: InboxRecord) -> Json:
        """Open the turn for `record` and run it; returns the reason `close` will log.

        Raises only when `turn/start` itself could not be appended (then nothing is owed).
        """
        self._consume(record)
        trigger = {"kind": "message", "source": record.source}
        self.session.append("turn/start", {"turn": self.number, "trigger": trigger})
        try:
            return await self._admit(record)
        except TurnInterrupted:
            self._end_open_step()
            return interruption_reason(self.agent.disposed)
        except Exception as exc:  # noqa: BLE001 - any failure inside the turn ends the turn, not the agent
            self._end_open_step()
            if self.signal.is_set():
                return interruption_reason(self.agent.disposed)
            log.warning(
                "agent %s: turn %d failed at step %d: %s",
                self.agent.id,
                self.number,
                self.step,
                render_error(exc),
            )
            self._report(exc)
            return error_reason(self.step, exc)

    async def close(self, reason: Json) -> None:
        """Append `turn/end`, settle the turn's tickets, and make the turn durable.

        Tickets settle as soon as `turn/end` is logged, before the flush: a slow store delays
        durability, not the answer. A failed flush is logged, not raised.
        """
        self.session.append("turn/end", {"turn": self.number, "reason": reason})
        self.settle(reason)
        try:
            await self.agent.host.sessions.flush(self.session)
        except Exception as exc:  # noqa: BLE001 - the turn is closed; the next flush retries the batch
            log.warning("agent %s: flush after turn %d failed: %s", self.agent.id, self.number, render_error(exc))
            self._report(exc)

    # --- admission ------------------------------------------------------------------------------

    async def _admit(self, record: InboxRecord) -> Json:
        self._checkpoint()
        hook = self.agent.host.hook.dsh_prompt_submit
        decision = await resolve(
            hook(
                agent=self.agent,
                content=record.content,
                source=record.source,
                signal=self.signal,
                contexts=record.contexts,
            )
        )
        self._checkpoint()
        if isinstance(decision, Block):
            blocked = {"content": record.content, "source": record.source, "reason": decision.reason}
            self.session.append("prompt/blocked", blocked)
            return {"kind": "rejected", "reason": decision.reason}
        # Any other decision admits the prompt; its absent parts mean "keep" and "no contexts".
        content = getattr(decision, "content", None)
        placement = place(
            record.content if content is None else content,
            record.source,
            getattr(decision, "additional_contexts", None) or (),
        )
        self.session.append("user/message", placement.data, surface_op="append")
        for context in placement.separate:
            self.agent.inject(context["content"], source=context.get("source"), meta=context.get("meta", ABSENT))
        return await self._steps()

    # --- steps ----------------------------------------------------------------------------------

    async def _steps(self) -> Json:
        reason: Json = COMPLETED
        prior_failures: list[Json] = []
        while True:
            self.step += 1
            self._write_steering()
            self._checkpoint()
            await self._compose_prefix()
            await serial(self._hook.dsh_agent_pre_step, self._arguments(step=self.step))
            self._checkpoint()
            messages = self.session.derive_messages()  # the request's boundary: nothing later joins it
            self.session.append("step/start", {"turn": self.number, "step": self.step})
            self._step_open = True
            self._checkpoint()
            try:
                outcome = await self._request(messages)
            except ModelRequestFailed as failed:
                self._end_open_step()
                self._checkpoint()
                retry = await self._wants_retry(failed, prior_failures)
                self._checkpoint()  # a cancel during recovery wins over its decision
                if not retry:
                    self._report(failed.error)
                    return failure_reason(self.step, failed.failure, failed.error)
                prior_failures.append(failed.failure)
                continue
            prior_failures = []
            if outcome.max_tokens:
                reason = MAX_TOKENS
            steered = self._write_steering()
            await self._durable()
            await serial(self._hook.dsh_agent_post_step, self._arguments(step=self.step))
            self._checkpoint()
            self._end_open_step()
            if not await self._continues(outcome.tool_calls or steered):
                return reason

    async def _continues(self, default: bool) -> bool:
        """After `step/end`: the continuation waterfall, then the terminal-stop chain."""
        decision = await waterfall(
            self._hook.dsh_agent_turn_continuation,
            self._arguments(default_decision=Continue() if default else Stop()),
        )
        self._checkpoint()
        if isinstance(decision, Continue) and decision.content is not None:
            # Loop-authored steering: not snapshotted or announced; its append validates it.
            source = decision.source if decision.source is not None else USER_SOURCE
            self._inbox.steer(InboxRecord(as_content(decision.content), source, FrozenList()))
        # Steering that arrived after checkpoint (b) still needs a step to be seen.
        proceed = isinstance(decision, Continue) or self._inbox.has_steering
        stop = await serial(self._hook.dsh_agent_turn_stop, self._arguments())
        self._checkpoint()
        if stop is not None:
            self.stopped = True
            self._inbox.discard_steering()  # a terminal stop drops all steering
            return False
        return proceed

    async def _compose_prefix(self) -> None:
        """Compose the agent's session prefix once; an interrupted composition is not kept."""
        if self._headers.prefix is not None:
            return
        arguments = {"agent": self.agent, "prefix": FrozenList(), "signal": self.signal}
        prefix = await waterfall(self._hook.dsh_agent_session_prefix, arguments)
        self._checkpoint()
        if not isinstance(prefix, Sequence) or isinstance(prefix, (str, bytes)):
            raise TypeError(f"dsh_agent_session_prefix returned {type(prefix).__name__}, not a list of messages")
        self._headers.prefix = frozen_loads(canonical_text(list(prefix)))

    async def _wants_retry(self, failed: ModelRequestFailed, prior_failures: list[Json]) -> bool:
        try:
            decision = await resolve(
                self.agent.host.hook.dsh_agent_request_error(
                    agent=self.agent,
                    turn=self.number,
                    step=self.step,
                    error=failed.error,
                    failure=failed.failure,
                    prior_failures=FrozenList(prior_failures),
                    signal=self.signal,
                )
            )
        except Exception as exc:  # noqa: BLE001 - a broken recovery plugin means "fail", not a new error
            log.warning("request recovery failed at turn %d, step %d: %s", self.number, self.step, render_error(exc))
            return False
        return decision == "retry"

    @property
    def _hook(self) -> HookRelay:
        return self.agent.host.hook

    def _arguments(self, **extra: object) -> dict[str, object]:
        """The arguments the turn's hooks share (agent, turn, signal), plus `extra`."""
        return {"agent": self.agent, "turn": self.number, "signal": self.signal, **extra}

    def _report(self, error: BaseException) -> None:
        self.agent.notify("dsh_agent_error", agent=self.agent, turn=self.number, step=self.step, error=error)

    async def _request(self, messages: list[dict[str, JsonValue]]) -> StepOutcome:
        config = await self._config()
        prefix = self._headers.prefix or FrozenList()
        wanted = {**self.agent.request_header(), "config": config, "messagePrefix": prefix}
        header = self._headers.record(self.session, canonical_header(wanted))
        config = header["config"]
        request = ModelRequest(
            provider=config["provider"],
            model=config["model"],
            messages=_frozen([*prefix, *messages]),
            system=header.get("system"),
            tools=header.get("tools"),
            temperature=config.get("temperature"),
            max_tokens=config.get("maxTokens"),
            stop=config.get("stop"),
            session_id=self.session.id,
            signal=self.signal,
        )
        await self._durable()  # the header is durable before the call
        assembled, chunk_seqs = await self._stream(self._adapter(request.provider), request)
        self._checkpoint()
        kind = assembled.finish.get("kind")
        if kind in ("error", "aborted"):
            raise ModelRequestFailed.from_finish(assembled.finish)
        max_tokens = kind == "max-tokens"
        content = await self._step_result(config, assembled, chunk_seqs, max_tokens)
        message = self._append_assistant(config, content, assembled, chunk_seqs)
        calls = [block for block in message.data["content"] if block.get("type") == "tool-call"]
        if calls:
            await self._run_batch(calls)
            self._checkpoint()
        return StepOutcome(tool_calls=bool(calls), max_tokens=max_tokens)

    async def _config(self) -> Json:
        """The request's call config: the `dsh_agent_request` waterfall over the seed config."""
        seed = self._headers.seed_config(self.session, self.agent.provider, self.agent.model)
        config = await waterfall(self._hook.dsh_agent_request, self._arguments(step=self.step, config=seed))
        self._checkpoint()
        route = (config.get("provider"), config.get("model")) if isinstance(config, Mapping) else (None, None)
        if not all(isinstance(part, str) and part for part in route):
            raise ValueError(NO_ROUTE_ERROR.format(id=self.agent.id))
        return cast("Json", config)

    def _adapter(self, provider: str) -> ModelAdapter:
        """The agent's adapter, or the host's for a provider `dsh_agent_request` switched to."""
        if provider == self.agent.provider:
            return self.agent.adapter
        return self.agent.host.models.adapter(provider)

    async def _step_result(
        self, config: Json, assembled: AssembledMessage, chunk_seqs: list[int], max_tokens: bool
    ) -> list[Json]:
        """The content to log: the assembled message through `dsh_agent_step_result`.

        A `max-tokens` step dispatches no tools, so its tool calls are stripped before and after.
        When the waterfall fails (or the turn is interrupted right after it) the logged chunks
        still get their `assistant/message`, empty, before the error propagates.
        """
        content = _without_tool_calls(assembled.content) if max_tokens else assembled.content
        message = _frozen({"role": "assistant", "content": content})
        try:
            result = await waterfall(self._hook.dsh_agent_step_result, self._arguments(step=self.step, message=message))
            self._checkpoint()
            content = _content_of(result)
        except Exception:
            self._append_assistant(config, [], assembled, chunk_seqs, replay=False)
            raise
        return _without_tool_calls(content) if max_tokens else content

    async def _stream(self, adapter: ModelAdapter, request: ModelRequest) -> tuple[AssembledMessage, list[int]]:
        assembler = StreamAssembler()
        chunk_seqs: list[int] = []
        # This loop runs once per streamed chunk, hundreds of times a step: its names are bound
        # once, and the checkpoint is inline.
        signal, append, feed, add_seq = self.signal, self.session.append, assembler.feed, chunk_seqs.append
        turn, step = self.number, self.step
        stream = adapter.stream(request)
        try:
            async for chunk in stream:
                if signal.is_set():
                    raise TurnInterrupted
                event = append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
                add_seq(event.seq)
                # Assemble what was logged, not what was sent, except for a plain text or
                # reasoning delta: the append checked that it equals its logged JSON, and of it
                # the assembler keeps only its text, joined into a new string, so both assemble
                # alike and most chunks need not be parsed back from the log.
                if not (
                    type(chunk) is dict
                    and chunk.get("type") in _TEXT_DELTAS
                    and type(chunk.get("index")) is int
                    and type(chunk.get("text", "")) is str
                ):
                    chunk = event.data["chunk"]
                feed(chunk)
        except ModelFailure as exc:
            raise ModelRequestFailed.from_error(exc) from exc
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return assembler.finish(), chunk_seqs

    def _append_assistant(
        self,
        config: Json,
        content: list[Json],
        assembled: AssembledMessage,
        chunk_seqs: list[int],
        *,
        replay: bool = True,
    ) -> Event:
        provenance: dict[str, JsonValue] = {"provider": config["provider"], "model": config["model"]}
        # Replay state describes the streamed content; any rewrite of it invalidates the state.
        if replay and assembled.replay_state is not None and content == assembled.content:
            provenance["replayState"] = assembled.replay_state
        data: dict[str, JsonValue] = {
            "turn": self.number,
            "step": self.step,
            "content": content,
            "provenance": provenance,
        }
        if assembled.usage is not None:
            data["usage"] = assembled.usage
        return self.session.append("assistant/message", data, surface_op="append", sources=chunk_seqs)

    # --- tools ----------------------------------------------------------------------------------

    async def _run_batch(self, calls: Sequence[Json]) -> None:
        """Run the calls concurrently (bounded); log their results in model order, then the contexts."""
        deferred: list[Json] = []
        self._deferred = deferred
        gate = asyncio.Semaphore(self.agent.max_parallel_tools)
        tasks = [asyncio.create_task(self._dispatch(call, gate)) for call in calls]
        try:
            for call, task in zip(calls, tasks, strict=True):
                # A tool's contexts are accepted with its result, in order with injections.
                deferred.extend(self._commit(call, await task))
        finally:
            for task in tasks:
                task.cancel()  # only matters when this turn itself was cancelled mid-batch
            self._deferred = None
            for context in deferred:
                self.session.append("context/message", context, surface_op="append")

    async def _dispatch(self, call: Json, gate: asyncio.Semaphore) -> _Dispatched | None:
        async with gate:
            if self.signal.is_set():
                return None  # never started: `_commit` logs it as aborted before dispatch
            event = self.session.append("tool/call", self._call_data(call))
            return _Dispatched(event.seq, await self._execute(call))

    async def _execute(self, call: Json) -> ToolOutcome:
        name = call["name"]
        tool = self.agent.tools.get(name)
        if tool is None:
            return ToolOutcome.failed(f'unknown tool "{name}"', "ToolNotFoundError", "TOOL_NOT_FOUND")
        try:
            arguments = parse_arguments(call["arguments"])
        except ValueError as exc:
            return ToolOutcome.failed(f"invalid arguments for {name}: {exc}", "ToolArgumentsError", "INVALID_ARGUMENTS")
        try:
            await self.agent.host.sessions.flush(self.session)  # the call is durable before its body runs
        except Exception as exc:  # noqa: BLE001 - without a durable call record the body must not run
            return ToolOutcome.failed(
                f"tool call not started: {render_error(exc)}", type(exc).__name__, "CHECKPOINT_FAILED"
            )
        if self.signal.is_set():
            return ABORTED_BEFORE_DISPATCH
        context = ToolContext(cwd=self.agent.cwd, session_id=self.session.id, signal=self.signal)
        try:
            result = await tool.run(arguments, context)
        except Exception as exc:  # noqa: BLE001 - a tool failure is the model's to see, as an error result
            return ToolOutcome.failed(render_error(exc), type(exc).__name__, error_code(exc) or "TOOL_FAILED")
        return _outcome_of(name, result)

    def _commit(self, call: Json, dispatched: _Dispatched | None) -> tuple[Json, ...]:
        """Log the call's result (and its call, if it never started); returns its contexts."""
        if dispatched is None:
            dispatched = _Dispatched(
                self.session.append("tool/call", self._call_data(call)).seq, ABORTED_BEFORE_DISPATCH
            )
        outcome = dispatched.outcome
        data: dict[str, JsonValue] = {
            "turn": self.number,
            "step": self.step,
            "callId": call["id"],
            "content": outcome.content,
            "isError": outcome.is_error,
        }
        if outcome.error is not None:
            data["error"] = outcome.error
        self.session.append("tool/result", data, surface_op="append", sources=[dispatched.call_seq])
        return outcome.contexts

    def _call_data(self, call: Json) -> dict[str, JsonValue]:
        return {
            "turn": self.number,
            "step": self.step,
            "callId": call["id"],
            "name": call["name"],
            "arguments": call["arguments"],
        }

    # --- helpers --------------------------------------------------------------------------------

    def _write_steering(self) -> bool:
        """Log every pending steering record with its contexts; True when there was any."""
        records = self._inbox.drain_steering()
        for record in records:
            self._consume(record)
            placement = place(record.content, record.source, record.contexts)
            self.session.append("steering/message", {"turn": self.number, **placement.data}, surface_op="append")
            for context in placement.separate:
                self.session.append("context/message", context_message(context), surface_op="append")
        return bool(records)

    def settle(self, reason: Json) -> None:
        """Resolve the tickets of the messages this turn wrote with its result (once: later calls do nothing)."""
        pending = [ticket for ticket in self.tickets if not ticket.done()]
        if not pending:
            return  # the driver's fallback settle after a normal close: no log scan again
        result = turn_result(self.session, self.number, self.first_seq, reason)
        for ticket in pending:
            ticket.finish(result)

    async def _durable(self) -> None:
        """Flush at a checkpoint; a cancel stops the wait (the flush finishes in the background)."""
        await abandon_on(self.signal, self.agent.host.sessions.flush(self.session), TurnInterrupted)

    def _consume(self, record: InboxRecord) -> None:
        if record.ticket is not None:
            record.ticket.consumed_by(self.number)
            self.tickets.append(record.ticket)

    def _checkpoint(self) -> None:
        if self.signal.is_set():
            raise TurnInterrupted

    def _end_open_step(self) -> None:
        if self._step_open:
            self._step_open = False
            self.session.append("step/end", {"turn": self.number, "step": self.step})


def parse_arguments(text: JsonValue) -> dict[str, JsonValue]:
    """A tool call's raw JSON arguments as an object; empty text means no arguments."""
    if not isinstance(text, str):
        raise ValueError(f"arguments must be JSON text, got {type(text).__name__}")
    if not text.strip():
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _without_tool_calls(content: Sequence[Json]) -> list[Json]:
    return [block for block in content if block.get("type") != "tool-call"]


def _content_of(message: object) -> list[Json]:
    """The content blocks of the message `dsh_agent_step_result` returned."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, (list, tuple)):
        raise TypeError(f"dsh_agent_step_result returned {type(message).__name__}, not a message with a content list")
    return list(content)


def _outcome_of(name: str, result: object) -> ToolOutcome:
    """Check a tool's result before it is committed, so committing cannot fail half-way."""
    if not isinstance(result, ToolResult):
        return ToolOutcome.failed(
            f"tool {name} returned {type(result).__name__}, not a ToolResult",
            "ToolResultError",
            "INVALID_RESULT",
        )
    try:
        content = frozen_loads(canonical_text(list(result.content)))
    except (NotLosslessJson, TypeError):
        return ToolOutcome.failed(
            f"tool {name} returned content that is not lossless JSON", "ToolResultError", "INVALID_RESULT"
        )
    try:
        contexts = tuple(frozen_loads(canonical_text(dict(c))) for c in result.additional_contexts)
    except (NotLosslessJson, TypeError, ValueError):
        return ToolOutcome.failed(CONTEXT_SNAPSHOT_ERROR, "TypeError", "INVALID_CONTEXT")
    error = None
    if result.is_error:
        error = dict(result.error) if result.error else {"name": "ToolError", "code": "TOOL_ERROR"}
    return ToolOutcome(content=content, is_error=result.is_error, error=error, contexts=contexts)


def _frozen(value: JsonValue) -> JsonValue:
    """A read-only view of derived messages; log data inside is already frozen and is shared."""
    if isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, dict):
        return FrozenDict((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list):
        return FrozenList(_frozen(item) for item in value)
    return value
