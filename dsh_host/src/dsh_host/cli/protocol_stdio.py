"""stdin and stdout for a protocol transport (`dsh acp`, `dsh mcp`): frames only on stdout.

For the whole run file descriptor 1 points at stderr, so a stray print, a warning or a
library's output cannot corrupt the stream; the frames go to a private duplicate of the
original stdout. Both ends are asyncio streams on non-blocking pipes: no thread ever blocks on
them, so a transport can stop at any moment.

A frame on stdout is whole or absent. The writer keeps no backlog (`drain()` returns only once
every byte written is in the pipe), so at most the frame in flight is unwritten when the
transport stops, and `finish_writing` lets it reach the pipe before the process exits: a
client that is reading gets it whole, even when the frame is larger than the pipe and the stop
came while the write was blocked.

Importing this module loads no event loop (a transport's command module imports it, and every
dsh run registers the commands): the functions that need asyncio import it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import signal
import stat
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

import click

if TYPE_CHECKING:
    import asyncio


def is_pipe_or_socket(fd: int, *, terminal: bool = False) -> bool:
    """Whether `fd` is a pipe or a socket (or, with `terminal`, a character device)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (terminal and stat.S_ISCHR(mode))


def check_transport(command: str, sdk: str, sdk_missing: str) -> None:
    """Refuse to serve `dsh <command>` (a `click.UsageError`, exit 2) on a stdout that is not a pipe
    or a socket, a stdin that is not one or a terminal, or without the protocol's SDK `sdk`
    (`sdk_missing` says how to install it)."""
    if not is_pipe_or_socket(1):
        raise click.UsageError(f"dsh {command}: stdout must be a pipe or a socket (it carries protocol frames only)")
    if not is_pipe_or_socket(0, terminal=True):
        raise click.UsageError(f"dsh {command}: stdin must be a pipe, a socket or a terminal")
    if importlib.util.find_spec(sdk) is None:
        raise click.UsageError(sdk_missing)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[IO[bytes]]:
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


PIPE_BYTES = 2**20
"""The capacity asked of a stdin or stdout pipe: a large frame then crosses in one write, not in
sixteen 64 KiB pieces that each wait for the other process to run (1 MiB is the most an
unprivileged process may ask for on Linux)."""


def widen_pipe(fd: int) -> None:
    """Ask for a `PIPE_BYTES` pipe behind `fd` (Linux; anything else, or a refusal, keeps the default)."""
    size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if size is not None and stat.S_ISFIFO(os.fstat(fd).st_mode):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, size, PIPE_BYTES)


async def stdio_streams(
    protocol_out: IO[bytes], *, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A reader on a duplicate of stdin (lines up to `limit` bytes) and a writer on `protocol_out`.

    Both pipes are widened (`widen_pipe`). The writer's `drain()` waits until the pipe holds all
    that was written, so a frame written and drained is out whole, and a frame not yet drained is
    the only one in flight (see `finish_writing`).
    """
    import asyncio

    for fd in (0, protocol_out.fileno()):
        widen_pipe(fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    # A duplicate of stdin: closing the transport must not close the process's stdin.
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(0), "rb", buffering=0))
    # StreamReaderProtocol brings the flow control StreamWriter.drain needs; its reader is unused.
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), protocol_out
    )
    # No backlog: a writer that drains after each frame has at most that frame in flight.
    transport.set_write_buffer_limits(high=0)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def finish_writing(writer: asyncio.StreamWriter, deadline: float) -> bool:
    """Wait until what was written to `writer` is in the pipe, or until loop time `deadline`.

    Called after the writing tasks stopped (cancelled mid-frame, say) and before the loop
    closes, which would drop the rest of a frame in flight. False when it is still unwritten at
    the deadline (the client stopped reading) or the pipe is gone.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    transport = writer.transport
    while transport.get_write_buffer_size() and not transport.is_closing():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        try:
            await asyncio.wait_for(writer.drain(), remaining)
        except (asyncio.TimeoutError, ConnectionError):
            return False
    return not transport.get_write_buffer_size()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[asyncio.Event]:
    """An event the running loop sets on SIGTERM or SIGINT, for the block (the handlers go after it)."""
    import asyncio

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGTERM, signal.SIGINT)
    for number in signals:
        loop.add_signal_handler(number, stop.set)
    try:
        yield stop
    finally:
        for number in signals:
            loop.remove_signal_handler(number)
