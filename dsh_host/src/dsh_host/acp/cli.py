"""`dsh acp`: serve one ACP client on stdin/stdout until EOF (or SIGTERM/SIGINT), then exit 0.

From startup to exit stdout carries protocol frames only: file descriptor 1 is pointed at
stderr for the whole run (so a stray print, a warning or a library's output cannot corrupt the
stream) and the frames go to a private duplicate of the original stdout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import stat
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

import click

from dsh_host.config import Config
from dsh_host.host import Host

if TYPE_CHECKING:
    # Registering the command (every dsh run) must not load asyncio: the functions that run the
    # server import it.
    import asyncio

log = logging.getLogger("dsh.acp")

ABSENT_PLUGINS = ("session-reference", "acp")
"""Never mounted on the ACP host: session references read other sessions, and `acp` is this."""

SDK_MISSING = "dsh acp needs the ACP SDK: pip install 'dsh-host[acp]'"


@click.command()
@click.pass_obj
def acp(host: Host) -> None:
    """Serve the Agent Client Protocol (v1) to one client on stdin/stdout, until EOF.

    Automation only: text prompts, committed answers, cancel and errors; no session query and
    no session references, whatever the configuration mounts. Logs go to stderr.
    """
    if not _is_pipe_or_socket(1):
        raise click.UsageError("dsh acp: stdout must be a pipe or a socket (it carries protocol frames only)")
    if not _is_pipe_or_socket(0, terminal=True):
        raise click.UsageError("dsh acp: stdin must be a pipe, a socket or a terminal")
    if importlib.util.find_spec("acp") is None:
        raise click.UsageError(SDK_MISSING)
    import asyncio

    config = acp_config(host)
    with _stdout_to_stderr() as protocol_out:
        asyncio.run(_serve(config, protocol_out))


def acp_config(host: Host) -> Config:
    """The CLI host's configuration with its plugins minus session-reference and acp.

    Says so on stderr (one line) when session-reference would have been mounted.
    """
    mounted = [plugin.name for plugin in host.mounted]
    if "session-reference" in mounted:
        log.warning("acp: ignoring session-reference and session query: the ACP transport mounts neither")
    plugins = [name for name in mounted if name not in ABSENT_PLUGINS]
    return dataclasses.replace(host.config, data={**host.config.data, "host": {**host.config.host, "plugins": plugins}})


async def _serve(config: Config, protocol_out: IO[bytes]) -> None:
    import asyncio
    import signal

    from dsh_host import __version__
    from dsh_host.acp.server import AcpServer

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGTERM, signal.SIGINT)
    for number in signals:
        loop.add_signal_handler(number, stop.set)
    try:
        async with Host.start(config, session_query=False) as host:
            reader, writer = await _stdio_streams(protocol_out)
            await AcpServer(host, agent_version=__version__).serve(reader, writer, stop=stop)
    finally:
        for number in signals:
            loop.remove_signal_handler(number)


async def _stdio_streams(protocol_out: IO[bytes]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    import asyncio

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    # A duplicate of stdin: closing the transport must not close the process's stdin.
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(0), "rb", buffering=0))
    # StreamReaderProtocol brings the flow control StreamWriter.drain needs; its reader is unused.
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), protocol_out
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[IO[bytes]]:
    """Point fd 1 at stderr for the block; yield a private file on the original stdout."""
    sys.stdout.flush()
    original = os.dup(1)
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    try:
        yield protocol_out
    finally:
        sys.stdout.flush()
        os.dup2(original, 1)
        os.close(original)
        protocol_out.close()


def _is_pipe_or_socket(fd: int, *, terminal: bool = False) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (terminal and stat.S_ISCHR(mode))
