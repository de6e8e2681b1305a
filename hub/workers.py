"""``quire hub serve --workers N``: N hub processes on one listening socket.

    quire hub serve (supervisor) ── binds HOST:PORT once, forks N workers, forwards SIGTERM/
       │                            SIGINT to them, and starts again one that exits by
       │                            itself (the others keep serving; a crash loop stops all)
       ├─ worker 0: create_app() → uvicorn on the shared socket, /metrics on METRICS_PORT
       ├─ worker 1: create_app() → uvicorn on the shared socket, /metrics on METRICS_PORT+1
       └─ …         (the kernel hands each new connection to one of them)

Each worker is a whole hub process, as if started on its own behind a proxy: its own
database pool, token cache and event streams. What must hold across them already holds
across hub processes on PostgreSQL (docs/operations.md "Limits across processes"): the
guard re-checks under the space's row lock in the committing transaction, the rate limits
and the DPoP replay cache live in the database, and ``LISTEN/NOTIFY`` wakes the watchers of
every process (hub/events.py). On SQLite none of the last three is shared (the DPoP replay
cache is in memory: a proof replayed to another worker would be accepted there), so
``--workers`` above 1 needs PostgreSQL and the CLI refuses it on SQLite
(``workers_need_postgresql``).

Everything that opens connections or threads (``create_app``, the metrics listener) runs in
the worker after the fork; the supervisor only holds the socket and the serving lock.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from hub import logs

log = logging.getLogger("quire.hub.workers")


def bind(host: str, port: int) -> socket.socket:
    """The listening socket every worker accepts on (as uvicorn would bind it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


RESTARTS = 5  # a worker that dies this many times within RESTART_WINDOW: a crash loop
RESTART_WINDOW = 60.0  # seconds


def supervise(n: int, worker: Callable[[int], int],
              clock: Callable[[], float] = time.monotonic) -> int:
    """Fork ``n`` workers running ``worker(index)`` and keep ``n`` running: a worker that
    exits by itself (a crash, an out-of-memory kill) is started again in its slot while the
    others keep serving. 0 when they all ended on a signal we forwarded; 1 after a crash
    loop (``RESTARTS`` exits of workers within ``RESTART_WINDOW``: the others are stopped
    and a service manager restarts the whole set, as for one process)."""
    children: dict[int, int] = {}
    for i in range(n):
        children[_fork(i, worker)] = i
    stopping = False

    def forward(sig: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    failed = False
    exits: list[float] = []
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        i = children.pop(pid, -1)
        if stopping or i < 0:
            continue
        now = clock()
        exits = [t for t in exits if now - t < RESTART_WINDOW] + [now]
        code = os.waitstatus_to_exitcode(status)
        if len(exits) >= RESTARTS:  # a crash loop: restarting would only spin
            failed = True
            logs.event(log, "worker.crash_loop", logging.ERROR, worker=i, pid=pid,
                       status=code, exits=len(exits), window_s=RESTART_WINDOW)
            forward(signal.SIGTERM, None)
            continue
        logs.event(log, "worker.restart", logging.WARNING, worker=i, pid=pid, status=code)
        children[_fork(i, worker)] = i
    return 1 if failed else 0


def _fork(i: int, worker: Callable[[int], int]) -> int:
    """Start worker ``i``; its pid (in the parent)."""
    pid = os.fork()
    if pid == 0:  # the worker: its own signal handling (uvicorn installs it)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        code = 1
        try:
            code = worker(i)
        except BaseException as e:  # noqa: BLE001 - report, then leave with a status
            logs.event(log, "worker.failed", logging.ERROR, worker=i, error=repr(e))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid
