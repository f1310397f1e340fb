"""Files only their owner reads: the index's folder (0700) and files (0600), whatever the umask."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Make `path` (and missing parents) a folder only its owner can enter; tighten it if it exists."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 unless it exists; tighten it (and its -wal/-shm) if looser."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            if os.stat(f"{path}{suffix}").st_mode & 0o777 != 0o600:
                os.chmod(f"{path}{suffix}", 0o600)
    return path
