"""Asking a running watcher for its journal instead of scanning the vault (git's fsmonitor
model; the watcher side is in replica/watch/core.py and replica/watch/daemon.py).

    reader                                  watcher (quire watch)
    ──────                                  ─────────────────────
    lock held? journal valid? ──► no ──► scan the vault as a sync does
    write <vault>/.quire-cookie-N   ──►     files thread: the cookie's event comes after
                                            every earlier vault event (one inotify queue)
    poll watch.json until N is      ◄──     Watcher records N in journal.cookies, after
    listed (≤ ``timeout``)                  the paths of those earlier events
    use journal.paths and .problems         (changed since the last scan; what it found)

A journal is valid only while the same watcher (``generation``) has had its file events
armed since before a scan that succeeded; a gap (the files thread stopped) or a restart
invalidates it, and any doubt (no answer in time) falls back to the scan.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from typing import Any

from replica.ipc.lock import WatchLock, lock_path, status_path
from replica.vault.journal_scan import Journal

COOKIE = ".quire-cookie-"  # replica/watch/daemon.py reports files named so


def _journal(space: Any) -> dict[str, Any] | None:
    try:
        doc = json.loads(status_path(space).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    j = doc.get("journal") if isinstance(doc, dict) else None
    return j if isinstance(j, dict) and j.get("valid") else None


class Board:
    """Cookies acknowledged by the watcher of this very process, for a reader in it (a
    ``quire status`` the watcher serves, replica/watch/server.py): it waits for the
    acknowledgement in memory, not for the next status file write (an fsync) and a poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}

    def ack(self, name: str, journal: dict[str, Any]) -> None:
        """Called by the watcher's thread (``Watcher.on_cookie``) once it handled every
        vault event before the cookie's."""
        with self._lock:
            slot = self._waiting.get(name)
        if slot is not None:
            slot[1].append(journal)
            slot[0].set()

    def journal(self, vault: Any, timeout: float) -> Journal | None:
        name = f"{COOKIE}{secrets.token_hex(8)}"
        slot: tuple[threading.Event, list[dict[str, Any]]] = (threading.Event(), [])
        with self._lock:
            self._waiting[name] = slot
        cookie = os.path.join(os.fspath(vault), name)
        try:
            with open(cookie, "xb"):
                pass
            if not slot[0].wait(timeout):
                return None
        except OSError:
            return None
        finally:
            with self._lock:
                self._waiting.pop(name, None)
            try:
                os.unlink(cookie)
            except OSError:
                pass
        return Journal.from_json(slot[1][0])


BOARDS: dict[str, Board] = {}  # space id -> the board of the watcher in this process


def read(space: Any, timeout: float = 2.0) -> Journal | None:
    """A running watcher's journal (the vault paths it saw change since its last scan, and
    the problems that scan found), once it has handled every event up to now; None: no
    valid journal (walk the vault instead)."""
    board = BOARDS.get(space.space_id)
    if board is not None:  # the watcher is this process
        return board.journal(space.vault, timeout)
    first = _journal(space)
    if first is None or not WatchLock(lock_path(space)).held_by_other():
        return None
    name = f"{COOKIE}{secrets.token_hex(8)}"
    cookie = os.path.join(os.fspath(space.vault), name)
    try:
        with open(cookie, "xb"):
            pass
    except OSError:
        return None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            j = _journal(space)
            if j is None or j.get("generation") != first.get("generation"):
                return None  # restarted or lost its events meanwhile
            if name in (j.get("cookies") or []):
                return Journal.from_json(j)
            time.sleep(0.005)
        return None
    finally:
        try:
            os.unlink(cookie)
        except OSError:
            pass
