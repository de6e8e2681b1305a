"""A blocking wake-up for the vault's file watcher, so an idle watcher costs no CPU.

    vault folders ──inotify──► Gate.wait(timeout) ──► True: something changed (drained)
                                                 └──► False: nothing before the timeout

watchfiles (daemon.py) says *what* changed, but its loop wakes every ``files_step_ms`` (10 ms)
even when nothing happens, to look at what its own inotify thread collected: about 100
wake-ups a second per watcher, 4–8 ms of CPU a second on this machine, which was most of a
reader's CPU per publication in the save bench (docs/decisions.md D141). The gate is a second
inotify instance on every folder of the vault, read only to know *that* something changed:
between changes the files thread blocks on it (daemon.py ``_Until.is_set``, which watchfiles
calls every step) and watchfiles steps only for a short while after each wake-up. Nothing
is decided from the gate's events: a change it missed (a folder made and filled before its
watch was added) is still collected by watchfiles and handed over at the next wake-up, at
the latest at the vault's identity check every ``VAULT_CHECK_S``.

Linux only; ``Gate.open`` returns None where inotify is not available or its limits are
reached (the watcher then steps as before), and a gate that cannot add a watch later says
so (``broken``) and its caller steps as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading
from typing import Any

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
        | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name (len bytes)

_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _libc


class Gate:
    """inotify on ``root`` and every folder below it (new folders added as they come)."""

    def __init__(self, fd: int, root: str):
        self.fd, self.root = fd, root
        self.paths: dict[int, str] = {}  # watch descriptor -> folder
        self.broken = False  # a watch could not be added: the caller steps as before
        self._poke_r, self._poke_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = threading.Event()

    def wake_on(self, stop: threading.Event) -> None:
        """End any ``wait`` as soon as ``stop`` is set (a thread that waits for it, at
        most a wake-up a second, until the gate is closed): a watcher stops at once."""

        def poke() -> None:
            while not self._closed.is_set():
                if stop.wait(1.0):
                    try:
                        os.write(self._poke_w, b"x")
                    except OSError:
                        pass
                    return

        threading.Thread(target=poke, name="files-gate-stop", daemon=True).start()

    @classmethod
    def open(cls, root: str) -> Gate | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            lib = _lib()
            fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None  # EMFILE: the user's inotify instances are all taken
        gate = cls(fd, root)
        gate._add_tree(root)
        if gate.broken:
            gate.close()
            return None
        return gate

    def _add(self, folder: str) -> None:
        wd = _lib().inotify_add_watch(self.fd, os.fsencode(folder),
                                      MASK | IN_ONLYDIR | IN_DONT_FOLLOW)
        if wd >= 0:
            self.paths[wd] = folder
        elif ctypes.get_errno() in (errno.ENOSPC, errno.ENOMEM):
            self.broken = True  # out of watches: a folder would go unseen

    def _add_tree(self, top: str) -> None:
        stack = [top]
        while stack and not self.broken:
            folder = stack.pop()
            self._add(folder)
            try:
                with os.scandir(folder) as it:
                    stack.extend(de.path for de in it if de.is_dir(follow_symlinks=False))
            except OSError:
                pass  # gone or unreadable meanwhile: watchfiles reports what it can

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a change anywhere in the vault; True when
        one came (every queued event is read, new folders are watched)."""
        if timeout > 0:
            try:
                ready, _, _ = select.select([self.fd, self._poke_r], [], [], timeout)
            except InterruptedError:
                return True  # let the caller look again
            if not ready:
                return False
            if self._poke_r in ready:
                return True  # stopping: the caller looks at its stop event
        came = False
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return came
            except OSError:
                self.broken = True
                return True
            came = True
            self._folders(buf)

    def _folders(self, buf: bytes) -> None:
        """Watch the folders made or moved in (and everything under them)."""
        off = 0
        while off + _EVENT.size <= len(buf):
            wd, mask, _cookie, n = _EVENT.unpack_from(buf, off)
            name = buf[off + _EVENT.size: off + _EVENT.size + n].rstrip(b"\0")
            off += _EVENT.size + n
            if mask & IN_IGNORED:  # the folder is gone (its watch with it)
                self.paths.pop(wd, None)
            elif mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO) and wd in self.paths:
                self._add_tree(os.path.join(self.paths[wd], os.fsdecode(name)))

    def close(self) -> None:
        self._closed.set()
        if self.fd >= 0:
            for fd in (self.fd, self._poke_r, self._poke_w):
                os.close(fd)
            self.fd = -1
