"""Claims shared by every supervisor on the host (other state roots, tests): an exclusive ``flock`` on a lock
file, held as long as its descriptor is open and released by the kernel if the process dies."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def try_lock(directory: Path, name: str, dir_mode: int, file_mode: int) -> int | None:
    """The descriptor holding ``<directory>/<name>`` locked (the directory made with ``dir_mode``, the file with
    ``file_mode`` when missing); None when another process holds it."""
    directory.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, file_mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
