"""docs/hooks.md, generated from `dsh_host.hookspecs`: each hook's signature and docstring.

The hook specifications are the single source: this module only adds the page's structure
(which section a hook belongs to, in which order, and its mode). Regenerate the page with
`python -m tests.hook_docs` from the repository root; `tests/test_hook_docs.py` fails when the
page and the specifications drift apart.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

from dsh_host import hookspecs

PAGE = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"

INTRO = """\
# Hook reference

Every hook a dsh plugin can implement, with its contract. This page is generated from the hook
specifications in `dsh_host.hookspecs` (`dsh_host/src/dsh_host/hookspecs.py`), one docstring and
one annotated signature per hook, by `python -m tests.hook_docs`; a test fails when the two
disagree. [plugins.md](plugins.md) explains how to write and install a plugin;
[hosts.md](hosts.md) how a custom host mounts one without installing it.

Implement a hook by name with `dsh_host.hookimpl` on a module, class or instance:

```python
from dsh_host import Agent, hookimpl


@hookimpl
def dsh_agent_created(agent: Agent) -> None:
    print("agent on", agent.session.id)
```

An implementation may take fewer arguments than the hook offers (pluggy passes only those it
names), never more, and its parameters are annotated as the hook's are (a test checks the
implementations in this repository). `@hookimpl(tryfirst=True)` / `(trylast=True)` order it
among the others; `@hookimpl(wrapper=True)` wraps the later implementations (`result = yield`).
The types in the signatures are public names: `Host`, `Agent`, `Session`, `Event`, `Tool`,
`ModelRequest`, `Composition`, `Allow`, `Block`, `Continue`, `Stop` from `dsh_host`;
`MaybeAwaitable`, `Json`, `StoreFactory`, `RegisterCompletion` from `dsh_host.hookspecs`;
`AdapterFactory` from `dsh_host.models`; `LogInvariant` from `dsh_host.log`; `EventRenderer`,
`ContextRenderer`, `CompletionSource`, `SlashCommandHandler` from `dsh_host.ui`.

## Modes

{modes}

Agent hooks (`dsh_agent_*`, `dsh_prompt_submit`, `dsh_compose_message`) may return awaitables:
the agent awaits whatever comes back, repeatedly, until it has a plain value. Many take a
`signal`, an `asyncio.Event` set when the work is cancelled: stop waiting then.
"""

MODES = [
    (
        "registration",
        "synchronously, every implementation, while the host (or the part that asks) starts",
        "nothing: the hook hands over a `register(...)` callable or an object to add to",
    ),
    (
        "notification",
        "every implementation, one at a time; an awaitable result is awaited in the background",
        "ignored; an exception is logged and contained",
    ),
    (
        "serial",
        "awaited one after the other",
        "the first result other than None or False ends the chain; an exception fails the turn",
    ),
    (
        "waterfall",
        "`firstresult`, with a host default that runs last (`trylast`)",
        "a plain implementation returning a value decides; a `wrapper=True` one gets the downstream result from"
        " `yield` (possibly an awaitable) and returns its replacement; an exception fails the turn",
    ),
    (
        "first result",
        "`firstresult`, with a host last-resort default",
        "the first non-None result decides; abstaining (None) must be synchronous, since an awaitable ends the chain",
    ),
    ("collected", "every implementation", "the results of all plugins are combined"),
]

SECTIONS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "Start-up and registration",
        "Synchronous, called while the host starts or when a part of it (the CLI, the UI, the model registry,"
        " the store, an agent) is first built. They validate and register; they do no I/O. The result is"
        " ignored unless said otherwise.",
        [
            ("dsh_mount", "registration"),
            ("dsh_unmount", "registration"),
            ("dsh_register_commands", "registration"),
            ("dsh_register_models", "registration"),
            ("dsh_register_tools", "registration"),
            ("dsh_register_slash_commands", "registration"),
            ("dsh_register_stores", "registration"),
            ("dsh_register_session_sources", "registration"),
        ],
    ),
    (
        "Composing a message",
        "How typed text becomes what an agent is sent (`Agent.compose`, `Agent.submit`).",
        [("dsh_compose_message", "first result")],
    ),
    (
        "The agent: inbox and prompts",
        "",
        [("dsh_agent_queued", "notification"), ("dsh_prompt_submit", "waterfall")],
    ),
    (
        "The agent: lifecycle",
        "",
        [
            ("dsh_agent_created", "notification"),
            ("dsh_agent_session_start", "notification"),
            ("dsh_agent_status", "notification"),
            ("dsh_agent_cancel_requested", "notification"),
            ("dsh_agent_error", "notification"),
            ("dsh_agent_disposed", "notification"),
            ("dsh_session_event", "notification"),
        ],
    ),
    (
        "The agent: steps and turns",
        "In the order one step calls them.",
        [
            ("dsh_agent_pre_step", "serial"),
            ("dsh_agent_session_prefix", "waterfall"),
            ("dsh_agent_request", "waterfall"),
            ("dsh_agent_step_result", "waterfall"),
            ("dsh_agent_request_error", "first result"),
            ("dsh_agent_post_step", "serial"),
            ("dsh_agent_turn_continuation", "waterfall"),
            ("dsh_agent_turn_stop", "serial"),
        ],
    ),
    (
        "Terminal UI and model requests",
        "What a plugin owns of the transcript, the editor and the HTTP requests.",
        [
            ("dsh_register_renderers", "registration"),
            ("dsh_register_context_renderers", "registration"),
            ("dsh_register_completions", "registration"),
            ("dsh_model_request_headers", "collected"),
            ("dsh_scripted_reply", "first result"),
        ],
    ),
    ("The log check", "", [("dsh_log_invariants", "collected")]),
    (
        "The web view",
        "What a plugin adds to the pages of `dsh web` (docs/web.md).",
        [("dsh_web_session_panels", "collected")],
    ),
]


def hook_specs() -> dict[str, Callable[..., object]]:
    """Every hook specification of `dsh_host.hookspecs`, by name, in source order."""
    return {
        name: fn
        for name, fn in vars(hookspecs).items()
        if name.startswith("dsh_") and callable(fn) and hasattr(fn, "dsh_spec")
    }


def call_form(fn: Callable[..., object]) -> str:
    """`name(a, b)`: how the page's headings and tables name a hook."""
    return f"{fn.__name__}({', '.join(inspect.signature(fn).parameters)})"


def annotated(fn: Callable[..., object]) -> str:
    """The hook's `def` line with its annotations, as the specification spells them."""
    signature = inspect.signature(fn)
    # Annotations come back as the compiler spells them; the page quotes strings as the source does.
    params = [f"{p.name}: {p.annotation}".replace("'", '"') for p in signature.parameters.values()]
    returns = str(signature.return_annotation).replace("'", '"')
    one_line = f"def {fn.__name__}({', '.join(params)}) -> {returns}: ..."
    if len(one_line) <= 100:
        return one_line
    body = "".join(f"    {param},\n" for param in params)
    return f"def {fn.__name__}(\n{body}) -> {returns}: ..."


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower-cased, punctuation dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def render() -> str:
    """The whole page."""
    specs = hook_specs()
    modes = "\n".join(
        ["| mode | how implementations are called | what the result means |", "|---|---|---|"]
        + [f"| {mode} | {how} | {meaning} |" for mode, how, meaning in MODES]
    )
    out = [INTRO.format(modes=modes), "## All hooks\n", "| hook | mode | summary |", "|---|---|---|"]
    for _, _, hooks in SECTIONS:
        for name, mode in hooks:
            form = call_form(specs[name])
            summary = (inspect.getdoc(specs[name]) or "").split("\n\n", 1)[0].replace("\n", " ")
            out.append(f"| [`{form}`](#{anchor(form)}) | {mode} | {summary} |")
    out.append("")
    for title, intro, hooks in SECTIONS:
        out.append(f"## {title}\n")
        if intro:
            out.append(f"{intro}\n")
        for name, mode in hooks:
            fn = specs[name]
            out.append(f"### `{call_form(fn)}`\n")
            out.append(f"Mode: {mode}.\n")
            out.append(f"```python\n{annotated(fn)}\n```\n")
            out.append(f"{inspect.getdoc(fn)}\n")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE}\n")
