"""A protocol server's stdout stalled mid-frame, for the tests that stop it there (Linux only).

A frame larger than the pipe, answered to a client that does not read, fills the pipe and
leaves the server's write blocked partway through the frame. `wait_until_full` tells when that
has happened, and `wait_until_delivered` when a signal sent then has reached the process, so a
test stops the server in the middle of a write by construction, not by timing. The waits poll
another process's state: synchronisation, not timing assertions.
"""

from __future__ import annotations

import fcntl
import signal
import subprocess
import termios
import time
from array import array
from collections.abc import Callable
from typing import IO

POLL_SECONDS = 0.005
WAIT_SECONDS = 60.0


def poll_until(check: Callable[[], bool], what: str) -> None:
    """Wait until `check()` holds, failing the test after `WAIT_SECONDS` with what it waited for."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {WAIT_SECONDS} s")
        time.sleep(POLL_SECONDS)


def pipe_capacity(pipe: IO[bytes]) -> int:
    """The bytes the pipe behind `pipe` holds when full (the server may have widened it)."""
    return fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ)


def _unread(pipe: IO[bytes]) -> int:
    count = array("i", [0])
    fcntl.ioctl(pipe.fileno(), termios.FIONREAD, count)
    return count[0]


def wait_until_full(pipe: IO[bytes]) -> None:
    """Wait until the pipe behind the read end `pipe` is full: its writer is blocked."""
    poll_until(lambda: _unread(pipe) >= pipe_capacity(pipe), "a full pipe")


def _pending(pid: int) -> int:
    """The signals pending for process `pid` (its own and its thread group's), as a bit mask."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)


def wait_until_delivered(process: subprocess.Popen[bytes], signum: int) -> None:
    """Send `signum` to `process` and wait until it is no longer pending (its handler took it)."""
    process.send_signal(signum)
    poll_until(lambda: not _pending(process.pid) & (1 << (signum - 1)), f"signal {signum} delivered")


def end_input(process: subprocess.Popen[bytes], how: str) -> None:
    """End a stalled server's input the way `how` says: `sigterm` (waiting until it is delivered) or `eof`."""
    if how == "sigterm":
        wait_until_delivered(process, signal.SIGTERM)
    else:
        assert process.stdin is not None
        process.stdin.close()


def wait_for_line(stream: IO[bytes], text: str) -> list[str]:
    """Read lines of `stream` until one holds `text`; the lines read."""
    lines = []
    while True:
        line = stream.readline().decode()
        if not line:
            raise AssertionError(f"the stream ended before a line with {text!r}: {lines}")
        lines.append(line)
        if text in line:
            return lines
