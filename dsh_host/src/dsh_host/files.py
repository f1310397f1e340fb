"""Private files and folders: what dsh keeps on disk is its user's alone, whatever the umask.

Public namespace `dsh_host.files`. The data dir holds transcripts and indexes of them, so every
folder dsh makes there is 0700 and every file 0600. A mode given to `mkdir` or `open` is cut by
the process's umask, which can only take permissions away: the modes are set again once the
entry exists, so a umask that takes the owner's own (say 0o277) cannot leave dsh a folder it
cannot write, and one of 000 never widens anything.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_FILE_MODE",
    "PRIVATE_FOLDER_MODE",
    "exposed_bits",
    "private_file",
    "private_folder",
    "withdraw_exposure",
]

PRIVATE_FOLDER_MODE = 0o700
"""The mode of every folder dsh creates: its owner reads, writes and enters it; nobody else."""

PRIVATE_FILE_MODE = 0o600
"""The mode of every file dsh creates: its owner reads and writes it; nobody else."""


def private_folder(path: str | os.PathLike[str]) -> Path:
    """Make `path` a folder with mode 0700, and each missing folder above it too; returns it.

    A folder that already exists is left as it is (its mode is its owner's choice; see
    `exposed_bits`). Raises `OSError` as `mkdir` does.
    """
    folder = Path(path)
    missing: list[Path] = []
    probe = folder
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=PRIVATE_FOLDER_MODE)
        except FileExistsError:
            if not made.is_dir():
                raise
            continue  # another process made it meanwhile: its mode is that process's doing
        os.chmod(made, PRIVATE_FOLDER_MODE)
    return folder


def private_file(path: str | os.PathLike[str]) -> bool:
    """Create `path` as an empty file with mode 0600 (its folders as `private_folder` does).

    Returns False, changing nothing, when the file already exists: create it here before a
    library (SQLite, say) opens it, and that library never creates it with a mode of its own.
    Raises `OSError` as `open` does.
    """
    file = Path(path)
    private_folder(file.parent)
    try:
        fd = os.open(file, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return True


def exposed_bits(path: str | os.PathLike[str]) -> int:
    """The permission bits of `path` that reach anyone but its owner (0 when private or absent)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return 0
    return stat.S_IMODE(mode) & 0o077


def withdraw_exposure(path: str | os.PathLike[str]) -> bool:
    """Take away every permission of `path` but its owner's; True when there was one to take."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if not mode & 0o077:
        return False
    os.chmod(path, mode & 0o700)
    return True
