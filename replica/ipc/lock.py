"""One watcher per space: the watch lock (an flock held for the watcher's life) and where a
space's watcher keeps its lock and status file (``watch.json``, written by
``replica/watch/core.py``'s ``Watcher``, read by ``quire status`` through ``replica/ipc/status_file.py``)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from shared.errors import LockHeld


def status_path(space: Any) -> Path:
    return Path(space.dir) / "watch.json"


def lock_path(space: Any) -> Path:
    return Path(space.dir) / "watch.lock"


class WatchLock:
    """One watcher per space: an flock on ``<space>/watch.lock`` held for the process's life;
    the file says who holds it (pid, started_at, host)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self, started_at: int) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self.holder() or {}
            os.close(fd)
            raise LockHeld(f"a watcher for this space is already running (pid "
                           f"{holder.get('pid', '?')}, started at "
                           f"{_when(holder.get('started_at'))})", holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "started_at": started_at,
                                 "host": socket.gethostname()}).encode())
        os.fsync(fd)
        self.fd = fd

    def holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def held_by_other(self) -> bool:
        """True when a live watcher holds the lock (used by ``quire status``)."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
