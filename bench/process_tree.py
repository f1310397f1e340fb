"""Run a child process and measure it whole: wall time, CPU time and peak memory over its process tree.

Memory is sampled every `INTERVAL` seconds as the sum of `VmRSS` over the child and all its
descendants (found through `/proc/<pid>/task/*/children`), so a build that spreads over worker
processes is counted whole; the kernel's own peak for the largest single process (`wait4`'s
`ru_maxrss`) is a floor under it, in case a short spike fell between two samples. CPU time is
the child's and its reaped descendants' user plus system time. Linux only.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

INTERVAL = 0.01


@dataclass(frozen=True)
class Run:
    """One measured child: its stdout, wall and CPU seconds, and peak tree RSS in MB."""

    stdout: bytes
    wall: float
    cpu: float
    peak_mb: float


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (those that exist now)."""
    found, index = [pid], 0
    while index < len(found):
        current = found[index]
        index += 1
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
            except OSError:
                continue
            found.extend(int(child) for child in children)
    return found


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_rss_mb(pid: int) -> float:
    """The resident memory of `pid` and its descendants now, in MB (10^6 bytes)."""
    return sum(_rss_kb(member) for member in descendants(pid)) * 1024 / 1e6


def run_measured(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Run `argv` to its end, sampling its tree's memory; a failure raises with its stderr."""
    with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=output, stderr=errors, env=env, cwd=cwd)
        peak = 0.0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, tree_rss_mb(process.pid))
            time.sleep(INTERVAL)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        stdout = output.read()
        if process.returncode:
            errors.seek(0)
            raise RuntimeError(f"{' '.join(argv)} failed ({process.returncode}): {errors.read().decode()[-2000:]}")
    peak = max(peak, usage.ru_maxrss * 1024 / 1e6)
    return Run(stdout, wall, usage.ru_utime + usage.ru_stime, peak)
