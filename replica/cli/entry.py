"""The ``quire`` console script. A command a running watcher can answer (``status``,
``sync``; replica/ipc/wire.py) is first sent to the watcher's socket, before anything
heavy is imported: the watcher runs it in its own process, with its store already open,
and this process prints the reply. When no watcher answers (no socket, a stale one, a
refusal, a timeout) the command runs here (replica/cli/main.py), as it always did.

``QUIRE_WATCHER_SOCKET=off`` never asks a watcher; ``=require`` fails (exit 1) instead of
running the command here (tests and benchmarks use it to know which path ran). Commands
are served only when stdout is not a terminal (colours and the progress bar stay local).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

from replica.ipc import wire

CONNECT_TIMEOUT = 1.0  # s: a live watcher accepts at once
REPLY_TIMEOUT = {"status": 120.0, "sync": 3600.0}  # s: a served sync may pull a lot


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        code = served(argv, os.environ)
    except BrokenPipeError:  # ``quire status | head`` answered by a watcher
        devnull = os.open(os.devnull, os.O_WRONLY)  # the last flush at exit goes nowhere
        os.dup2(devnull, sys.stdout.fileno())
        return 0  # quietly, as replica/cli/main.py ``closed_pipe``
    if code is not None:
        return code
    from replica.cli.main import main as run_here

    return run_here(argv)


def served(argv: list[str], environ: Any) -> int | None:
    """The exit code of the command answered by a watcher (its output printed), or None:
    run it here."""
    mode = environ.get(wire.ENV_SWITCH, "")
    command = wire.command_of(argv)
    if mode == "off" or command not in wire.ALLOWED or "-h" in argv or "--help" in argv:
        return None
    why = "stdout is a terminal"
    if not _isatty(sys.stdout):
        home = wire.home_root(environ)
        request = {"v": wire.VERSION, "argv": argv, "home": home, "env": wire.env_of(environ)}
        why = "no watcher socket"
        for path in _sockets(home):
            reply, why = ask(path, request, REPLY_TIMEOUT[command])
            if reply is not None:
                sys.stdout.write(reply["stdout"])
                sys.stdout.flush()
                sys.stderr.write(reply["stderr"])
                sys.stderr.flush()
                return int(reply["code"])
            if why != "not_watched":
                break
    if mode == "require":
        print(f"error: no watcher served this command ({why}) [{wire.ENV_SWITCH}=require]",
              file=sys.stderr)
        return 1
    if environ.get("QUIRE_LOG_LEVEL", "").upper() == "DEBUG":
        print(f"quire: running here, not served by a watcher ({why})", file=sys.stderr)
    return None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _sockets(home: str) -> list[str]:
    try:
        names = sorted(os.listdir(wire.run_dir(home)))
    except OSError:
        return []
    return [os.path.join(wire.run_dir(home), n) for n in names if n.endswith(".sock")]


def ask(path: str, request: dict[str, Any], timeout: float
        ) -> tuple[dict[str, Any] | None, str]:
    """(the served reply, "") or (None, why not)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(CONNECT_TIMEOUT)
            with wire.address(path) as addr:
                s.connect(addr)
            if not wire.same_user(wire.peer_uid(s)):
                return None, "the socket's owner is another user"
            s.sendall(wire.encode(request))
            s.shutdown(socket.SHUT_WR)
            s.settimeout(timeout)
            raw = wire.read_all(s, wire.MAX_REPLY)
    except OSError as e:  # no socket, a stale one (refused), a timeout
        return None, f"{type(e).__name__}: {e}"
    try:
        reply = json.loads(raw or b"")
    except ValueError:
        return None, "no valid reply"
    if not isinstance(reply, dict) or reply.get("v") != wire.VERSION:
        return None, "no valid reply"
    if reply.get("served") is not True:
        err = reply.get("error")
        return None, str(err.get("code")) if isinstance(err, dict) else "not served"
    if not (isinstance(reply.get("stdout"), str) and isinstance(reply.get("stderr"), str)
            and isinstance(reply.get("code"), int)):
        return None, "no valid reply"
    return reply, ""


if __name__ == "__main__":
    sys.exit(main())
