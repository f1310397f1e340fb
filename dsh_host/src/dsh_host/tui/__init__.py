"""The terminal UI: a prompt_toolkit editor over a rich transcript in the terminal's scrollback.

- `app`: the chat application; `run_chat(host, session_id=None, continue_last=False)` is the
  `dsh chat` entry point.
- `render`: transcript renderables; `render_events(console, events)` prints stored events as
  the chat shows them.
- `submit`: what Enter does (commands, send or steer, session-reference preparation).
- `completion` and `file_search`: `@` completion of files and sessions, `/` of commands.
- `terminal_text`: escaping of control characters in untrusted text.

Nothing is imported here, so `render` can be used without loading prompt_toolkit.
"""
