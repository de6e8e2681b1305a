"""The serving lock of a hub data folder: ``quire hub serve`` holds ``serve.lock`` shared for
its whole life (several processes may serve one folder), ``quire hub restore`` takes it
exclusive without waiting, so it refuses (``hub_serving``) while any process serves.

A lock held by a killed process is released by the kernel: no stale lock files. Processes
on other machines serving the same PostgreSQL database are not seen (docs/operations.md).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


def _open(data_dir: Path) -> IO[bytes]:
    fd = os.open(data_dir / "serve.lock", os.O_RDWR | os.O_CREAT, 0o600)
    return os.fdopen(fd, "r+b")


def hold_serving(data_dir: Path) -> IO[bytes]:
    """Mark the folder served (keep the returned file open while serving)."""
    f = _open(data_dir)
    fcntl.flock(f, fcntl.LOCK_SH)
    return f


def take_exclusive(data_dir: Path) -> IO[bytes] | None:
    """The folder to ourselves (keep the file open), or None while a process serves it."""
    f = _open(data_dir)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f
