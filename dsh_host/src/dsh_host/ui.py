"""The terminal UI's public types (namespace `dsh_host.ui`): what a plugin uses to take part in
the transcript, the `@` menu and the slash commands. Importing it loads rich.

- Transcript: `Transcript` (what `render(data, transcript)` gets), and the blocks a renderer or
  a command prints: `card`, `notice`, `error`. `EventRenderer` and `ContextRenderer` are what
  `dsh_register_renderers` and `dsh_register_context_renderers` register.
- The `@` menu: `CompletionSource` is what `dsh_register_completions` registers; it gets the
  `AtToken` at the cursor and returns `MentionCompletion`s.
- Slash commands: `SlashCommandHandler` is what `dsh_register_slash_commands` registers; its
  `ui` argument is a `SlashCommandUI`. `dsh_host.testing.RecordingUI` runs one in a test.

Every string a plugin takes from a log or a model passes `dsh_host.display_text` (or
`display_inline_text`) and is wrapped in `rich.text.Text`, never markup; `notice` and `error`
escape their text themselves, `card` takes text the caller already escaped.
"""

from dsh_host.tui.file_search import AtToken
from dsh_host.tui.mentions import CompletionSource, MentionCompletion
from dsh_host.tui.render import ContextRenderer, EventRenderer, Transcript, card, error, notice
from dsh_host.tui.slash import SlashCommandHandler, SlashCommandUI

__all__ = [
    "AtToken",
    "CompletionSource",
    "ContextRenderer",
    "EventRenderer",
    "MentionCompletion",
    "SlashCommandHandler",
    "SlashCommandUI",
    "Transcript",
    "card",
    "error",
    "notice",
]
