"""The watcher socket's wire (docs/watch.md, "Commands served by the watcher"): what a
``quire`` command and a running ``quire watch`` agree on when the watcher answers the command
in its own process (the client is replica/cli/entry.py, the server replica/watch/server.py).
Standard library only: the client imports it before anything else, on every ``quire`` run.

    $QUIRE_HOME/run/                 0700, owned by this user
    └── <space_id>.sock              0600; one per watched space, bound by its watcher

One request per connection: a JSON object on one line (at most ``MAX_REQUEST`` bytes),
``{"v": 1, "argv": [...], "home": "/abs/home", "env": {...}}``; one JSON reply, then the
server closes. Served: ``{"v": 1, "served": true, "stdout": …, "stderr": …, "code": N}``,
exactly what the command prints and its exit code. Not served: ``{"v": 1, "served": false,
"error": {"code", "message"}}`` with one of ``ERRORS``; nothing was run, and the client does
the work itself.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

VERSION = 1
ALLOWED = ("status", "sync")  # read-only, or no side effect beyond what a sync does
MAX_REQUEST = 64 * 1024  # bytes of one request line
MAX_ARGS = 64
MAX_REPLY = 64 * 1024 * 1024
ENV_SWITCH = "QUIRE_WATCHER_SOCKET"  # "off": never ask a watcher; "require": fail if none answers
# Not served; the client runs the command itself (codes are documented in docs/watch.md):
ERRORS = {
    "forbidden": "the peer is another user (SO_PEERCRED)",
    "request_too_large": f"the request is over {MAX_REQUEST} bytes",
    "bad_request": "the request is not a JSON object of the documented shape",
    "not_allowed": "the command is not one a watcher serves (" + ", ".join(ALLOWED) + ")",
    "other_home": "the request names another Quire home than the watcher's",
    "env_differs": "the caller's QUIRE_* environment differs from the watcher's",
    "not_watched": "the command's space is not the one this socket serves",
    "busy": "the watcher's sync did not finish in time, or too many requests at once",
    "not_served": "the command cannot be answered by the watcher (help, usage)",
    "internal": "the watcher failed while running the command",
}
# QUIRE_* variables that do not change what a served command does; every other one (a
# delegation token, provenance such as QUIRE_AGENT, QUIRE_HEAD_MAX_AGE, …) must be the same
# in the caller and the watcher, or the caller runs the command itself
IGNORED_ENV = ("QUIRE_HOME", ENV_SWITCH, "QUIRE_LOG_LEVEL")
IGNORED_PREFIXES = ("QUIRE_WATCH_", "QUIRE_HUB_")


def env_of(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment a served command depends on."""
    return {k: v for k, v in environ.items() if k.startswith("QUIRE_")
            and k not in IGNORED_ENV and not k.startswith(IGNORED_PREFIXES)}


def home_root(environ: Mapping[str, str]) -> str:
    """The Quire home as replica/machine/home.py finds it, made absolute."""
    env = environ.get("QUIRE_HOME")
    if not env:
        from platformdirs import user_data_dir

        env = user_data_dir("quire", appauthor=False)
    return os.path.abspath(env)


def run_dir(home: str) -> str:
    return os.path.join(home, "run")


def socket_path(home: str, space_id: str) -> str:
    return os.path.join(run_dir(home), f"{space_id}.sock")


def command_of(argv: list[str]) -> str | None:
    """The command word: the first argument that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


@contextmanager
def address(path: str) -> Iterator[str]:
    """An address for ``bind``/``connect``. A Unix socket path is limited to 107 bytes; a
    longer one (a deep QUIRE_HOME) is reached through its folder's descriptor
    (``/proc/self/fd/N/name``, Linux)."""
    if len(os.fsencode(path)) <= 100:
        yield path
        return
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (SO_PEERCRED: pid, uid, gid), or None."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt,
                                                              struct.calcsize("3i")))
    except OSError:
        return None
    return int(uid)


def same_user(cred_uid: int | None, uid: int | None = None) -> bool:
    """Only this user's processes talk to its watcher, either way."""
    return cred_uid is not None and cred_uid == (os.getuid() if uid is None else uid)


def encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def read_all(sock: socket.socket, limit: int, *, line: bool = False) -> bytes | None:
    """Bytes until EOF (or the first newline with ``line``); None past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
        if line and b"\n" in chunk:
            break
    return b"".join(chunks)
