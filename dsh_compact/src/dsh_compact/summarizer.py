"""The summarizer: one model call that condenses the shadowed history into a checkpoint.

The request replays the conversation's last routed request (same system prompt, same tools,
same message prefix, then the shadowed messages) so the provider's prefix cache is reused,
and appends `COMPACTION_INSTRUCTION` as the final user message. The raw summary is kept in
`compact/summary`; the checkpoint message carries it framed between `CHECKPOINT_PREAMBLE` and
the `<compacted-summary>` tags, as separate content blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dsh_compact.errors import SummarizationError
from dsh_compact.targets import CompactAgent, ModelTarget, routed_target
from dsh_host.text import js_trim

if TYPE_CHECKING:
    import asyncio

    from dsh_compact.config import CompactConfig
    from dsh_host import Session
    from dsh_host.hookspecs import Json, JsonValue
    from dsh_host.models import ResolvedModel

COMPACTION_INSTRUCTION = "\n".join(
    (
        (
            "You are now acting as a compaction engine for this AI coding assistant. Condense the "
            "conversation ABOVE into a structured checkpoint that lets another model resume the work "
            "with no loss of essential context."
        ),
        "",
        (
            "Output EXACTLY the Markdown structure below: keep every section, in order. Use terse "
            'bullets, not prose paragraphs. Write "(none)" for an empty section — never drop a section.'
        ),
        "",
        "## Primary Request and Intent",
        "- [the user's original and evolving goals; quote verbatim where the exact wording matters]",
        "",
        "## Key Technical Concepts",
        "- [technologies, frameworks, patterns, and conventions in play]",
        "",
        "## Files and Code",
        "- [exact path: why it matters, key changes or snippets]",
        "",
        "## Errors and Fixes",
        "- [error: how it was resolved, plus any related user feedback]",
        "",
        "## Pending Tasks",
        "- [explicitly requested work not yet completed]",
        "",
        "## Current Work",
        "- [precisely what was in progress at this checkpoint]",
        "",
        "## Next Step",
        '- [the single next action, directly in line with the most recent request, or "(none)"]',
        "",
        "## Critical Context",
        ("- [decisions and their rationale, constraints, user preferences, open questions, data needed to continue]"),
        "",
        "Rules:",
        ("- Preserve exact file paths, commands, error strings, identifiers, and function signatures."),
        "- Capture user feedback and explicit instructions faithfully, especially corrections.",
        "- Do NOT mention this summarization request or that the context was compacted.",
        "- Output only the checkpoint text: do not call any tool or take any other action.",
        (
            "- If the conversation already contains a <compacted-summary> block, it is a PRIOR "
            "checkpoint. Do not copy it forward verbatim: preserve still-true facts, drop stale ones, "
            "and merge newer information into a single consolidated summary under the same structure."
        ),
    )
)
"""The final user message of a summarization request (exact text; no trailing newline)."""

CHECKPOINT_PREAMBLE = (
    "This is an automatically generated checkpoint condensing an earlier span of the "
    "conversation to free up context. Treat the captured context as established background and "
    "build on it without restating it. Continue the task directly from the messages that "
    "follow, without acknowledging this checkpoint."
)
"""The text that opens every checkpoint, before the `<compacted-summary>` tag (300 characters)."""

SUMMARY_OPEN_TAG = "<compacted-summary>"
SUMMARY_CLOSE_TAG = "</compacted-summary>"
PURPOSE = "compaction"

ModelResolver = Callable[[ModelTarget], "ResolvedModel"]
"""Resolves a target to the adapter that serves it (and the pair actually dispatched)."""


def frame(summary: Sequence[Json]) -> list[dict[str, JsonValue]]:
    """The checkpoint content: preamble and opening tag, the summary blocks, the closing tag."""
    return [
        {"type": "text", "text": f"{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}"},
        *(dict(block) for block in summary),
        {"type": "text", "text": SUMMARY_CLOSE_TAG},
    ]


@dataclass(frozen=True)
class SummarizationInput:
    """What the summarizer condenses: the replayed request prefix plus the shadowed messages."""

    messages: tuple[Json, ...]
    system: str | None = None
    tools: tuple[Json, ...] | None = None


def build_summarization_input(session: Session, shadowed: Sequence[int]) -> SummarizationInput:
    """Replay the latest request header's prefix, then the shadowed nodes in surface order."""
    from dsh_host.log import derive_event_message

    header = session.request_header() or {}
    messages = list(header.get("messagePrefix") or ())
    for seq in shadowed:
        message = derive_event_message(session.event(seq))
        if message is not None:
            messages.append(message)
    tools = header.get("tools")
    return SummarizationInput(
        messages=tuple(messages),
        system=header.get("system"),
        tools=tuple(tools) if tools is not None else None,
    )


@dataclass(frozen=True)
class Summary:
    """A summarizer's answer: the raw summary blocks and the target that produced them."""

    blocks: tuple[Json, ...]
    provider: str
    model: str
    max_tokens: int | None = None


class Summarizer(Protocol):
    """Produces the summary of one compaction; raising fails that compaction."""

    async def summarize(
        self, request: SummarizationInput, agent: CompactAgent, signal: asyncio.Event | None
    ) -> Summary: ...


class ModelSummarizer:
    """The default summarizer: one streamed call to a model adapter, purpose "compaction".

    The target is the configured summarization model if one is set (per the policy of the
    conversation's model), else the model of the latest routed request, else the agent's
    configured model.
    """

    def __init__(self, config: CompactConfig, resolve: ModelResolver) -> None:
        self._config = config
        self._resolve = resolve

    async def summarize(
        self, request: SummarizationInput, agent: CompactAgent, signal: asyncio.Event | None
    ) -> Summary:
        # The model machinery is imported by the first summary, not by mounting the plugin.
        from dsh_host import ModelRequest
        from dsh_host.models import StreamAssembler

        routed = routed_target(agent.session)
        policy = self._config.policy_for(routed or agent.fallback)
        target = policy.summarization_target or routed or agent.fallback
        if target is None:
            raise SummarizationError(
                "no provider/model available for summarization: set both summarization_provider and "
                "summarization_model in [plugins.compact], route one request, or configure the agent's model"
            )
        resolved = self._resolve(target)
        model_request = ModelRequest(
            provider=resolved.provider,
            model=resolved.model,
            messages=[
                *request.messages,
                {"role": "user", "content": [{"type": "text", "text": COMPACTION_INSTRUCTION}]},
            ],
            system=request.system,
            tools=list(request.tools) if request.tools is not None else None,
            max_tokens=policy.max_tokens,
            session_id=agent.session.id,
            purpose=PURPOSE,
            signal=signal,
        )
        assembler = StreamAssembler()
        async for chunk in resolved.adapter.stream(model_request):
            assembler.feed(chunk)
        message = assembler.finish()
        finish = message.finish
        kind = finish.get("kind")
        if kind in ("error", "aborted"):
            failure = finish.get("failure") or {}
            raise SummarizationError(str(failure.get("message", kind)), failure.get("code"))
        if kind == "max-tokens":
            raise SummarizationError("summarization truncated at the token cap (incomplete checkpoint)", "MAX_TOKENS")
        blocks = tuple(block for block in message.content if block.get("type") == "text")
        if not any(js_trim(str(block.get("text", ""))) for block in blocks):
            raise SummarizationError("summarization produced no text summary content")
        return Summary(blocks, model_request.provider, model_request.model, policy.max_tokens)
