"""Entry point of the `dsh` command.

Configuration decides which plugins are mounted, and mounted plugins add subcommands, so the
global options (`--config`, `--debug`, `--version`) are read before click parses the rest:
load and validate the configuration, mount the plugins, then build and run the command group.
Errors print one line, `dsh: error: <message>`, and exit 2 for usage or configuration and 1
for runtime failures; a traceback is printed only with `--debug`.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence

import click

from dsh_host import __version__
from dsh_host.cli import chat, demo, info, run, sessions
from dsh_host.config import load_config
from dsh_host.errors import DshError
from dsh_host.host import Host


def _global_options(argv: Sequence[str]) -> tuple[str | None, bool, bool]:
    """`--config PATH`, `--debug` and `--version` given before the subcommand."""
    config, debug, version = None, False, False
    args = list(argv)
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        if arg == "--debug":
            debug = True
        elif arg == "--version":
            version = True
        elif arg == "--config" and i + 1 < len(args):
            config = args[i + 1]
            i += 1
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif arg == "--":
            break
        i += 1
    return config, debug, version


class _OneLine(logging.Formatter):
    """Warnings as one line on stderr; tracebacks only with --debug."""

    def __init__(self, debug: bool) -> None:
        super().__init__("dsh: %(levelname)s: %(message)s")
        self._debug = debug

    def format(self, record: logging.LogRecord) -> str:
        record.levelname = record.levelname.lower()
        if not self._debug and record.exc_info:
            exc = record.exc_info[1]
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            record.args = ()
        return super().format(record)


def configure_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine(debug))
    logger = logging.getLogger("dsh")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    logger.propagate = False


def build_cli(host: Host) -> click.Group:
    """The root command group: built-in commands plus the mounted plugins' commands."""

    @click.group(
        name="dsh",
        invoke_without_command=True,
        context_settings={"help_option_names": ["-h", "--help"]},
        help="dsh: a terminal agent host composed of plugins. With no command, opens the chat UI.",
    )
    @click.option("--config", "config_path", metavar="PATH", help="Read this configuration file.")
    @click.option("--debug", is_flag=True, help="Print tracebacks on errors.")
    @click.version_option(__version__, prog_name="dsh")
    @click.pass_context
    def cli(ctx: click.Context, config_path: str | None, debug: bool) -> None:
        ctx.obj = host
        if ctx.invoked_subcommand is None:
            chat.open_chat(host, session_id=None, continue_last=False)

    for command in (info.plugins, info.config, sessions.sessions, run.run, demo.demo, chat.chat):
        cli.add_command(command)
    host.hook.dsh_register_commands(cli=cli)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config_path, debug, version = _global_options(args)
    if version:
        click.echo(f"dsh {__version__}")
        return 0
    configure_logging(debug)
    host: Host | None = None
    try:
        host = Host.start(load_config(config_path))
        cli = build_cli(host)
        cli.main(args, prog_name="dsh", standalone_mode=False)
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("dsh: aborted", err=True)
        return 130
    except click.ClickException as exc:
        click.echo(f"dsh: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except DshError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"dsh: error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the command line reports any failure as one line
        if debug:
            traceback.print_exc()
        click.echo(f"dsh: error: {type(exc).__name__}: {exc}", err=True)
        return 1
    finally:
        if host is not None:
            host.close()


if __name__ == "__main__":
    raise SystemExit(main())
