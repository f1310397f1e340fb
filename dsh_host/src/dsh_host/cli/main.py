"""Entry point of the `dsh` command.

Configuration decides which plugins are mounted, and mounted plugins add subcommands, so the
global options (`--config`, `--debug`, `--version`) are read and taken off the command line before
click parses the rest: load and validate the configuration, mount the plugins, then build and run
the command group.
Errors print one line, `dsh: error: <message>`, and exit 2 for usage or configuration and 1
for runtime failures; a traceback is printed only with `--debug`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator, Sequence

import click

from dsh_host import __version__
from dsh_host.cli import chat
from dsh_host.cli.progress_bar import drawing_progress
from dsh_host.config import load_config
from dsh_host.errors import DshError
from dsh_host.host import Host
from dsh_host.terminal_text import display_text

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


class _OneLine(logging.Formatter):
    """Warnings as one line on stderr; tracebacks only with --debug."""

    def __init__(self, debug: bool) -> None:
        super().__init__("dsh: %(levelname)s: %(message)s")
        self._debug = debug

    def format(self, record: logging.LogRecord) -> str:
        # A copy: other handlers of the same record (a test's log capture) see it unchanged.
        line = logging.makeLogRecord({**record.__dict__, "levelname": record.levelname.lower()})
        if not self._debug and record.exc_info:
            exc = record.exc_info[1]
            line.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            line.args, line.exc_info, line.exc_text = (), None, None
        return super().format(line)


@contextlib.contextmanager
def _logging_to_stderr(debug: bool) -> Iterator[None]:
    """Show the `dsh.*` loggers' records on stderr, one line each, until the command returns.

    The previous configuration of the `dsh` logger comes back afterwards, so `main` called in
    a process (a test, a host embedding the command) leaves no handler behind.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine(debug))
    logger = logging.getLogger("dsh")
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    logger.propagate = False
    try:
        # Progress of long work (first-open indexing) is a bar on a terminal, not log lines.
        with drawing_progress(sys.stderr):
            yield
    finally:
        logger.handlers[:], level, logger.propagate = saved
        logger.setLevel(level)


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
            chat.open_chat(host, session_id=None, continue_last=False)

    host.hook.dsh_register_commands(cli=cli)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `dsh` command line on `argv` (default `sys.argv[1:]`); returns the exit code."""
    debug = False
    # Closing the host (which can warn) and then restoring logging, after any error is reported.
    with contextlib.ExitStack() as stack:
        try:
            config_path, debug, version, args = _global_options(sys.argv[1:] if argv is None else argv)
            if version:
                click.echo(f"dsh {__version__}")
                return 0
            stack.enter_context(_logging_to_stderr(debug))
            host = stack.enter_context(Host.start(load_config(config_path)))
            build_cli(host).main(args, prog_name="dsh", standalone_mode=False)
            return 0
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


if __name__ == "__main__":
    raise SystemExit(main())
