"""Rich renderables for the transcript, one logged event at a time.

The transcript is printed into the terminal's own scrollback, so each committed event becomes
renderables once and is never redrawn. Every string taken from an event passes through
`dsh_host.terminal_text` and is wrapped in `rich.text.Text` (never markup), so neither terminal controls
nor rich's `[style]` syntax in a message can take effect.

Which renderer an event type gets, and how a context of a kind is shown, is registered through
the `dsh_register_renderers` and `dsh_register_context_renderers` hooks: the host registers its
own event types (`HOST_RENDERERS`, from `dsh_host.builtins`), plugins theirs. User and steering
messages show their display content (the envelope's `displayContent` when present), never a
baked prompt-prefix snapshot; a prefix context shows only as what its kind's renderer draws.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from rich.box import Box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

from dsh_host.session.events import display_prompt_content
from dsh_host.terminal_text import display_inline_text, display_text
from dsh_host.text import js_trim

if TYPE_CHECKING:
    from pluggy import HookRelay

    from dsh_host.hookspecs import Json, JsonValue
    from dsh_host.session.events import Event

# A box that draws only a left gutter bar, on every row including the blank top and bottom.
_GUTTER = Box("▌   \n" * 8)

USER_STYLE = "bright_blue"
STEERING_STYLE = "yellow"
ASSISTANT_STYLE = "bold bright_magenta"
CARD_STYLE = "dim"
NOTICE_STYLE = "bright_black"
ERROR_STYLE = "red"

_TOOL_OUTPUT_WIDTH = 200
_TOOL_ARGUMENTS_WIDTH = 120


def join_display_text(blocks: object) -> str:
    """The text the transcript shows for a content list, concatenated without separators.

    Text and reasoning blocks give their text, tool calls `name(arguments)`, tool results their
    own content joined the same way, and any other block `[<type>]`.
    """
    if not isinstance(blocks, Sequence) or isinstance(blocks, str):
        return ""
    parts = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            parts.append(_string(block.get("text")))
        elif kind == "tool-call":
            parts.append(f"{_string(block.get('name'))}({_string(block.get('arguments'))})")
        elif kind == "tool-result":
            parts.append(join_display_text(block.get("content")))
        else:
            parts.append(f"[{_string(kind)}]")
    return "".join(parts)


EventRenderer = Callable[["Json", "Transcript"], "list[RenderableType]"]
"""`render(data, transcript)`: the renderables one logged event of a type prints (often none)."""

ContextRenderer = Callable[["Json"], "RenderableType | None"]
"""`render(meta)`: how a context of a kind is shown, or None when the meta is not valid for it."""


class Transcript:
    """How logged events look in the transcript, as the host and its plugins registered it.

    Built from a host's hook relay: `dsh_register_renderers` gives one renderer per event type,
    `dsh_register_context_renderers` one per context kind (`meta.kind`).
    """

    def __init__(self, hook: HookRelay) -> None:
        self._events: dict[str, EventRenderer] = {}
        self._contexts: dict[str, ContextRenderer] = {}
        hook.dsh_register_renderers(register=self._register_event)
        hook.dsh_register_context_renderers(register=self._register_context)

    def _register_event(self, event_type: str, render: EventRenderer) -> None:
        if event_type in self._events:
            raise ValueError(f"a renderer for {event_type!r} events is already registered")
        self._events[event_type] = render

    def _register_context(self, kind: str, render: ContextRenderer) -> None:
        if kind in self._contexts:
            raise ValueError(f"a renderer for {kind!r} contexts is already registered")
        self._contexts[kind] = render

    def render(self, event: Event | Json) -> list[RenderableType]:
        """What the transcript prints for one logged event (often nothing).

        `event` is a session `Event` or its log form (a mapping with `type` and `data`).
        """
        kind, data = _type_and_data(event)
        if not isinstance(data, Mapping) or not isinstance(kind, str):
            return []
        renderer = self._events.get(kind)
        return list(renderer(data, self)) if renderer is not None else []

    def render_context(self, context: object) -> RenderableType | None:
        """How `context` is shown by the renderer of its `meta.kind`; None when nobody shows it."""
        meta: JsonValue = context.get("meta") if isinstance(context, Mapping) else None
        kind = meta.get("kind") if isinstance(meta, Mapping) else None
        renderer = self._contexts.get(kind) if isinstance(kind, str) else None
        return renderer(meta) if renderer is not None else None

    def print(self, console: Console, events: Iterable[Event | Json]) -> None:
        """Print stored events as the chat transcript shows them (stream chunks are skipped)."""
        for event in events:
            for renderable in self.render(event):
                console.print(renderable)


def notice(text: str) -> RenderableType:
    """An informational line; `text` is escaped for the terminal here."""
    return _block(Text(display_text(text), style=NOTICE_STYLE))


def error(text: str) -> RenderableType:
    """An error line; `text` is escaped for the terminal here."""
    return _block(Text(display_text(text), style=ERROR_STYLE))


def card(text: str) -> RenderableType:
    """A dim one-item line (a context's summary card); `text` must already be escaped."""
    return _block(Text(text, style=CARD_STYLE))


def banner(
    model: str, session_id: str, features: Sequence[str], cwd: str | None, *, sessions_mentionable: bool = False
) -> RenderableType:
    """The greeting: model, session and mounted features, and what `@` completes (sessions too, when mentionable)."""
    title = Text.assemble(("DSH", "bold bright_blue"), " ", ("chat", "bold"))
    details = Text(
        "  •  ".join(
            [
                display_inline_text(model),
                f"session {display_inline_text(session_id)}",
                "features: " + (", ".join(display_inline_text(f) for f in features) or "none"),
            ]
        ),
        style="dim",
    )
    hint = Text(
        f"{display_inline_text(cwd or '(no cwd)')}  ·  /help for commands"
        f"  ·  @ mentions files{' and sessions' if sessions_mentionable else ''}  ·  Ctrl+C twice to exit",
        style=NOTICE_STYLE,
    )
    return _block(Group(title, details, hint))


def session_listing(rows: Sequence[tuple[str, str, str | None, str | None]], current: str) -> RenderableType:
    """`/sessions`: one line per (id, created ISO time, cwd, title), the current one marked."""
    if not rows:
        return notice("No sessions yet.")
    lines = Text()
    for index, (session_id, created, cwd, title) in enumerate(rows):
        if index:
            lines.append("\n")
        lines.append("* " if session_id == current else "  ", style="bold")
        lines.append(display_inline_text(session_id), style="bold")
        lines.append(f"  {created}  {display_inline_text(cwd or '(no cwd)')}", style="dim")
        if title:
            lines.append(f"  {display_inline_text(title)}")
    return _block(lines)


def _block(renderable: RenderableType) -> RenderableType:
    # One blank line above every transcript item, one column in from the edge.
    return Padding(renderable, (1, 0, 0, 1), expand=False)


def _message(label: str, style: str, data: Json, transcript: Transcript) -> list[RenderableType]:
    out: list[RenderableType] = []
    text = display_text(js_trim(join_display_text(display_prompt_content(data))))
    if text:
        body = Text.assemble((label, f"bold {style}"), "\n", text)
        panel = Panel(body, box=_GUTTER, border_style=style, padding=(0, 1), expand=False)
        out.append(Padding(panel, (1, 0, 0, 0), expand=False))
    envelope = data.get("envelope")
    contexts = envelope.get("prefixContexts") if isinstance(envelope, Mapping) else None
    if isinstance(contexts, Sequence):
        for context in contexts:
            shown = transcript.render_context(context)
            if shown is not None:
                out.append(shown)
    return out


def _user_message(data: Json, transcript: Transcript) -> list[RenderableType]:
    source = data.get("source")
    plugin = _plugin_of(source)
    return _message("You" if plugin is None else f"Message · {plugin}", USER_STYLE, data, transcript)


def _steering_message(data: Json, transcript: Transcript) -> list[RenderableType]:
    plugin = _plugin_of(data.get("source"))
    return _message("Steering" if plugin is None else f"Steering · {plugin}", STEERING_STYLE, data, transcript)


def _context_message(data: Json, transcript: Transcript) -> list[RenderableType]:
    shown = transcript.render_context(data)
    if shown is not None:
        return [shown]
    label = _plugin_of(data.get("source")) or "context"
    body = Text.assemble((f"Context · {label}", "bold dim"))
    text = display_text(js_trim(join_display_text(data.get("content"))))
    if text:
        body.append("\n" + text, style=NOTICE_STYLE)
    return [_block(body)]


def _assistant_message(data: Json, _: Transcript) -> list[RenderableType]:
    content = data.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    body = Text()
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") not in ("text", "reasoning"):
            continue  # tool calls print as their own cards when the loop runs them
        text = display_text(js_trim(_string(block.get("text"))))
        if not text:
            continue
        if body:
            body.append("\n")
        body.append(text, style="dim italic" if block.get("type") == "reasoning" else "")
    if not body:
        return []
    return [_block(Group(Text("Assistant", style=ASSISTANT_STYLE), body))]


def _tool_call(data: Json, _: Transcript) -> list[RenderableType]:
    arguments = _clip(display_inline_text(_string(data.get("arguments"))), _TOOL_ARGUMENTS_WIDTH)
    line = Text.assemble(("⏺ ", "cyan"), (display_inline_text(_string(data.get("name"))), "bold"))
    line.append(f"({arguments})", style="dim")
    return [_block(line)]


def _tool_result(data: Json, _: Transcript) -> list[RenderableType]:
    failed = data.get("isError") is True
    lines = js_trim(join_display_text(data.get("content"))).split("\n")
    first = _clip(display_inline_text(lines[0]), _TOOL_OUTPUT_WIDTH) or "(no output)"
    line = Text("  ⎿ ", style="dim")
    line.append("error" if failed else "ok", style=ERROR_STYLE if failed else "green")
    line.append(f" · {first}", style="dim")
    if len(lines) > 1:
        line.append(f"  (+{len(lines) - 1} lines)", style="dim")
    return [Padding(line, (0, 0, 0, 1), expand=False)]


def _prompt_blocked(data: Json, _: Transcript) -> list[RenderableType]:
    return [error(f"Prompt blocked: {_string(data.get('reason'))}")]


def _turn_end(data: Json, _: Transcript) -> list[RenderableType]:
    reason: JsonValue = data.get("reason")
    kind = reason.get("kind") if isinstance(reason, Mapping) else None
    if kind == "error":
        failure = reason.get("failure")
        message = failure.get("message") if isinstance(failure, Mapping) else reason.get("message")
        return [error(f"Turn failed: {_string(message)}")]
    messages = {
        "aborted": "Turn cancelled.",
        "disposed": "Turn ended: the agent was disposed.",
        "max-tokens": "Turn ended: the model reached its output token limit.",
        "interrupted": "Turn interrupted: the previous run ended before it finished.",
    }
    return [notice(messages[kind])] if kind in messages else []


HOST_RENDERERS: Mapping[str, EventRenderer] = {
    "user/message": _user_message,
    "steering/message": _steering_message,
    "context/message": _context_message,
    "assistant/message": _assistant_message,
    "tool/call": _tool_call,
    "tool/result": _tool_result,
    "prompt/blocked": _prompt_blocked,
    "turn/end": _turn_end,
}
"""The renderers of the host's own event types (registered from `dsh_host.builtins`)."""


def _type_and_data(event: Event | Json) -> tuple[JsonValue, JsonValue]:
    if isinstance(event, Mapping):
        return event.get("type"), event.get("data")
    return event.type, event.data


def _plugin_of(source: object) -> str | None:
    """None for the user (or a missing source), else the plugin name or kind, escaped."""
    if not isinstance(source, Mapping) or source.get("kind") in (None, "user"):
        return None
    name = source.get("plugin") if source.get("kind") == "plugin" else source.get("kind")
    return display_inline_text(_string(name))


def _string(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
