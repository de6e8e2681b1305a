"""The watcher's socket (docs/watch.md, "Commands served by the watcher"): ``quire status``
and ``quire sync`` answered inside a running ``quire watch``, so they pay neither a second
interpreter start-up nor a second store open (the client is replica/cli/entry.py, the wire
replica/ipc/wire.py).

One socket per watched space, ``$QUIRE_HOME/run/<space_id>.sock``, bound by the process
that holds the space's watch lock (so any file already there is stale and is replaced).
The folder is made 0700 and must belong to this user; the socket is 0600; every peer is
checked with SO_PEERCRED (another uid is refused). A request runs the command through the
CLI's own ``main`` (given by replica/cli/main.py: this module does not import the CLI), with
stdout and stderr captured for that thread only, so the reply is byte for byte what the
command prints. A served sync runs on the watcher's open replica, under the same lock as
the watcher's own syncs (``SpaceSyncer.run_served``): never two syncs of one store at once.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from replica.ipc import wire

log = logging.getLogger("quire.watch")
MAX_CLIENTS = 8  # requests answered at once; more are refused (busy)
READ_TIMEOUT = 5.0  # s to send a request


class NotServed(Exception):  # noqa: N818 - a reply, not a failure
    """This watcher does not answer the request (``code``: one of ``wire.ERRORS``)."""

    def __init__(self, code: str, message: str | None = None):
        super().__init__(message or wire.ERRORS[code])
        self.code = code


class _Capture:
    """``sys.stdout``/``sys.stderr`` for the whole process: a thread running a served
    command writes to its own buffer (no terminal: no colour, no progress bar); every
    other thread writes to the real stream."""

    _local = threading.local()

    def __init__(self, real: TextIO, which: str):
        self._real, self._which = real, which

    def _buf(self) -> list[str] | None:
        return getattr(self._local, self._which, None)

    def write(self, text: str) -> int:
        buf = self._buf()
        if buf is None:
            return self._real.write(text)
        buf.append(text)
        return len(text)

    def flush(self) -> None:
        if self._buf() is None:
            self._real.flush()

    def isatty(self) -> bool:
        return False if self._buf() is not None else self._real.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @classmethod
    def install(cls) -> None:
        if not isinstance(sys.stdout, cls):
            sys.stdout = cls(sys.stdout, "stdout")
        if not isinstance(sys.stderr, cls):
            sys.stderr = cls(sys.stderr, "stderr")

    @classmethod
    def run(cls, fn: Callable[[], int]) -> tuple[int, str, str]:
        cls.install()  # again: something may have replaced sys.stdout since
        out: list[str] = []
        err: list[str] = []
        cls._local.stdout, cls._local.stderr = out, err
        try:
            code = fn()
        finally:
            cls._local.stdout = cls._local.stderr = None
        return code, "".join(out), "".join(err)


def check_peer(cred_uid: int | None, uid: int | None = None) -> None:
    if not wire.same_user(cred_uid, uid):
        raise NotServed("forbidden")


class SocketServer:
    """The socket of one watched space. ``run(argv, served=check)`` is the CLI's ``main``:
    ``check(args)`` is called on the parsed arguments before the command runs and raises
    ``NotServed`` for anything this watcher must not answer."""

    def __init__(self, home_root: Path, space: Any, syncer: Any,
                 run: Callable[..., int]):
        self.home = os.path.abspath(home_root)
        self.space, self.syncer, self.run = space, syncer, run
        self.path = wire.socket_path(self.home, space.space_id)
        self.sock: socket.socket | None = None
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self._inode: int | None = None

    # ------------------------------------------------------------ life

    def start(self) -> bool:
        """Bind and serve; False (logged, the watcher runs on without it) when the folder
        is not safely ours or the socket cannot be bound."""
        folder = wire.run_dir(self.home)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            st = os.lstat(folder)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                log.warning("not serving commands: %s is not a folder of this user", folder)
                return False
            os.chmod(folder, 0o700)
            try:
                os.unlink(self.path)  # stale: we hold the space's watch lock
            except FileNotFoundError:
                pass
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)
            try:
                with wire.address(self.path) as addr:
                    sock.bind(addr)
            finally:
                os.umask(old)
            os.chmod(self.path, 0o600)
            self._inode = os.lstat(self.path).st_ino
            sock.listen(16)
        except OSError as e:
            log.warning("not serving commands on %s: %s", self.path, e)
            return False
        self.sock = sock
        _Capture.install()
        threading.Thread(target=self._accept, name=f"socket-{self.space.name}",
                         daemon=True).start()
        return True

    def stop(self) -> None:
        sock, self.sock = self.sock, None
        if sock is None:
            return
        try:
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _accept(self) -> None:
        while self.sock is not None:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed by stop()
            threading.Thread(target=self._handle, args=(conn,), daemon=True,
                             name=f"served-{self.space.name}").start()

    # ------------------------------------------------------------ one request

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                if not self._slots.acquire(blocking=False):
                    conn.sendall(wire.encode(refusal(NotServed("busy"))))
                    return
                try:
                    uid = wire.peer_uid(conn)
                    conn.settimeout(READ_TIMEOUT)
                    # read (bounded) before any refusal: closing a Unix socket with unread
                    # bytes resets it, and the client would never see why
                    raw = wire.read_all(conn, wire.MAX_REQUEST, line=True)
                    conn.settimeout(None)
                    check_peer(uid)
                    reply = self.answer(raw)
                except NotServed as e:
                    reply = refusal(e)
                finally:
                    self._slots.release()
                conn.sendall(wire.encode(reply))
            except OSError as e:  # the client went away
                log.info("served request dropped: %s", e)

    def answer(self, raw: bytes | None) -> dict[str, Any]:
        """The reply to one request line (``None``: over the size limit)."""
        try:
            argv, home, env = parse_request(raw)
            if home != self.home:
                raise NotServed("other_home")
            if env != wire.env_of(os.environ):
                raise NotServed("env_differs")
            code, out, err = _Capture.run(lambda: self.run(argv, served=self.check))
        except NotServed as e:
            return refusal(e)
        except SystemExit:  # argparse's help and exits: the client prints them itself
            return refusal(NotServed("not_served"))
        except Exception:  # noqa: BLE001 - the watcher carries on; the client runs it
            log.exception("served command failed")
            return refusal(NotServed("internal"))
        return {"v": wire.VERSION, "served": True, "stdout": out, "stderr": err,
                "code": int(code)}

    def check(self, args: Any) -> None:
        """Called by the CLI's ``main`` once the arguments are parsed."""
        from replica.machine.home import Home

        if args.command not in wire.ALLOWED:
            raise NotServed("not_allowed")
        space = Home(Path(self.home)).space(args.space)  # errors print as they would here
        if space.space_id != self.space.space_id:
            raise NotServed("not_watched")
        if args.command == "sync":
            args.run_sync = self.syncer.run_served
        else:
            args.store = self.syncer.open_store()


def parse_request(raw: bytes | None) -> tuple[list[str], str, dict[str, str]]:
    if raw is None:
        raise NotServed("request_too_large")
    try:
        doc = json.loads(raw.split(b"\n", 1)[0])
    except ValueError:
        raise NotServed("bad_request") from None
    if not isinstance(doc, dict) or doc.get("v") != wire.VERSION:
        raise NotServed("bad_request")
    argv, home, env = doc.get("argv"), doc.get("home"), doc.get("env")
    if (not isinstance(argv, list) or len(argv) > wire.MAX_ARGS
            or not all(isinstance(a, str) for a in argv)
            or not isinstance(home, str) or not isinstance(env, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise NotServed("bad_request")
    if wire.command_of(argv) not in wire.ALLOWED:
        raise NotServed("not_allowed")
    if "-h" in argv or "--help" in argv:
        raise NotServed("not_served")
    return argv, os.path.abspath(home), env


def refusal(e: NotServed) -> dict[str, Any]:
    return {"v": wire.VERSION, "served": False,
            "error": {"code": e.code, "message": str(e)}}
