"""Entry point of the `dsh` command.

Configuration decides which plugins are mounted, and mounted plugins add subcommands, so the
global options (`--config`, `--debug`, `--version`) are read and taken off the command line before
click parses the rest: load and validate the configuration, mount the plugins, then build and run
the command group.
Only what the command being run needs is imported: `--version` loads click and the version
alone, and the host, its store and the mounted plugins are imported once configuration says
which.
Errors print one line, `dsh: error: <message>`, and exit 2 for usage or configuration and 1
for runtime failures; a traceback is printed only with `--debug`.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from dsh_host import __version__
from dsh_host.errors import DshError
from dsh_host.terminal_text import display_text

if TYPE_CHECKING:
    from dsh_host.host import Host

_GLOBAL_OPTIONS_HELP = """\b
Global options (before the command):
  --config PATH  Read this configuration file.
  --debug        Print tracebacks on errors.
  --version      Print the version and exit."""


def _global_options(argv: Sequence[str]) -> tuple[str | None, bool, bool, list[str]]:
    """`--config PATH`, `--debug` and `--version` given before the subcommand, and the other arguments.

    The global options are taken off the command line (click never sees them); any other option
    before the subcommand (`--help`, a mistyped one) stays for click to handle.
    """
    config, debug, version = None, False, False
    args = list(argv)
    rest: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        if arg == "--debug":
            debug = True
        elif arg == "--version":
            version = True
        elif arg == "--config":
            if i + 1 == len(args):
                raise click.UsageError("Option '--config' requires an argument.")
            config = args[i + 1]
            i += 1
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif arg == "--":
            break
        else:
            rest.append(arg)
        i += 1
    return config, debug, version, rest + args[i:]


def build_cli(host: Host) -> click.Group:
    """The root command group; its commands (the host's own and the plugins') come from `dsh_register_commands`."""

    @click.group(
        name="dsh",
        invoke_without_command=True,
        context_settings={"help_option_names": ["-h", "--help"]},
        help="dsh: a terminal agent host composed of plugins. With no command, opens the chat UI.\n\n"
        + _GLOBAL_OPTIONS_HELP,
    )
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        ctx.obj = host
        if ctx.invoked_subcommand is None:
            from dsh_host.cli.chat import open_chat

            open_chat(host, session_id=None, continue_last=False)

    host.hook.dsh_register_commands(cli=cli)
    return cli


def _start_host(config_path: str | None, args: Sequence[str]) -> Host:
    """The configured host; for a command line asking for help, the host's own commands when that fails.

    Help must not depend on a configuration that cannot be read or plugins that cannot mount:
    the failure becomes a note on stderr, and the help lists the built-in commands.
    """
    from dsh_host.config import Config, load_config
    from dsh_host.errors import ConfigError, PluginError
    from dsh_host.host import Host

    try:
        return Host.start(load_config(config_path))
    except (ConfigError, PluginError) as exc:
        if not _asks_for_help(args):
            raise
        click.echo(f"dsh: note: {display_text(str(exc))}; showing the built-in commands only", err=True)
        return Host.start(Config.from_mapping({"host": {"plugins": []}}))


def _asks_for_help(args: Sequence[str]) -> bool:
    """Whether the command line asks for help (`--help` or `-h` before any `--`)."""
    for arg in args:
        if arg == "--":
            return False
        if arg in ("--help", "-h"):
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `dsh` command line on `argv` (default `sys.argv[1:]`); returns the exit code.

    Without `argv`, as the `dsh` program runs it, the process is taken to end when the command
    does, and the cyclic garbage collector is kept off the objects start-up makes (see
    `_start_up_done`).
    """
    debug = False
    as_program = argv is None
    if as_program:
        gc.disable()
    # Closing the host (which can warn) and then restoring logging, after any error is reported.
    with contextlib.ExitStack() as stack:
        try:
            config_path, debug, version, args = _global_options(sys.argv[1:] if argv is None else argv)
            if version:
                click.echo(f"dsh {__version__}")
                return 0
            from dsh_host.cli.stderr import logging_to_stderr

            stack.enter_context(logging_to_stderr(debug))
            host = stack.enter_context(_start_host(config_path, args))
            cli = build_cli(host)
            if as_program:
                _start_up_done()
            # Not standalone, click hands back the code of a `click.exceptions.Exit` instead of raising it.
            code = cli.main(args, prog_name="dsh", standalone_mode=False)
            return code if isinstance(code, int) else 0
        except click.exceptions.Exit as exc:
            return exc.exit_code
        except click.exceptions.Abort:
            click.echo("dsh: aborted", err=True)
            return 130
        except click.ClickException as exc:
            click.echo(f"dsh: error: {display_text(exc.format_message())}", err=True)
            return exc.exit_code
        except DshError as exc:
            if debug:
                traceback.print_exc()
            click.echo(f"dsh: error: {display_text(str(exc))}", err=True)
            return exc.exit_code
        except KeyboardInterrupt:
            return 130
        except Exception as exc:  # noqa: BLE001 - the command line reports any failure as one line
            if debug:
                traceback.print_exc()
            click.echo(f"dsh: error: {type(exc).__name__}: {display_text(str(exc))}", err=True)
            return 1


def _start_up_done() -> None:
    """Freeze what start-up made, then collect as usual.

    Start-up (the modules, the host, its plugins and commands) makes objects that live until
    the process exits, by the hundred thousand: collections during start-up find nothing to
    free, and each later one, the last at exit included, would walk all of them again. Frozen,
    they are never walked; what the command itself makes is collected as always. Only for a
    process that ends with the command: in a process that goes on (a test calling `main(argv)`)
    freezing would keep whatever garbage was waiting, for good.
    """
    gc.freeze()
    gc.enable()


if __name__ == "__main__":
    raise SystemExit(main())
