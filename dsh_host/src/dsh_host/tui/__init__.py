"""The terminal UI: a prompt_toolkit editor over a rich transcript in the terminal's scrollback.

- `app`: the chat application; `run_chat(host, session_id=None, continue_last=False)` is the
  `dsh chat` entry point.
- `render`: transcript renderables; `Transcript(host.hook).print(console, events)` prints stored
  events as the chat shows them, with the renderers the host and its plugins register.
- `submit`: what Enter does (commands; compose, then send or steer).
- `commands`: the host's own slash commands (registered from `dsh_host.builtins`).
- `completion`, `mentions` and `file_search`: `@` completion of files and of what plugins
  offer, `/` of commands.
- `title`: the window title naming the chat's session.
- `slash`: slash commands: the registry, the `ui` their handlers get, running one.

These modules are private; plugins use their public face, `dsh_host.ui`. Nothing is imported
here, so `render` can be used without loading prompt_toolkit.
"""
