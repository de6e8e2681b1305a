"""``quire watch``: the watcher's threads around its decision core (replica/watch/core.py).

    files thread  (watchfiles/inotify on the vault) ──► ("local", n, paths) ─┐
                  (the vault folder gone, back)     ──► ("vault", gone|back) ─┤
    stream thread (the hub's /events SSE stream)   ──► ("remote", head)     ─┼─► inbox
    signal handler (SIGINT/SIGTERM)                ──► ("stop",)           ─┘     │
                                                                                  ▼
                                      Watcher.run (one thread per space) ──► SpaceSyncer
"""

from __future__ import annotations

import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replica.app import service
from replica.ipc.journal import BOARDS, COOKIE, Board
from replica.ipc.lock import WatchLock, lock_path, status_path
from replica.machine.home import write_json
from replica.vault import journal_scan
from replica.watch.activity import Teller
from replica.watch.core import Watcher, WatchSettings, refused
from replica.watch.gate import Gate
from replica.watch.pacing import Backoff
from replica.watch.server import SocketServer
from replica.watch.syncer import SpaceSyncer
from shared.errors import QuireError

log = logging.getLogger("quire.watch")


def _is_entry_file(vault: Path, p: str) -> bool:
    if not p.endswith(".md"):
        return False
    try:
        rel = Path(p).relative_to(vault)
    except ValueError:
        return False
    return not any(part.startswith(".") for part in rel.parts)


def _journaled(vault: str, p: str) -> bool:
    """Does a vault walk look at this path (journal_scan.py)? A folder's own event counts:
    moved out, in or renamed, it is the only event for every file under it."""
    if p == vault or not p.startswith(vault + os.sep):
        return True  # the vault itself: the journal scan then walks all of it
    return all(journal_scan.walked(part) for part in p[len(vault) + 1:].split(os.sep))


# a batch of this many changed paths may have overflowed the kernel's event queue, which
# watchfiles does not report (notify's overflow event has no path): rescan the whole vault
OVERFLOW_HINT = 1000
VAULT_WAIT_S = 1.0  # how often a watcher whose vault is gone looks for it again
VAULT_CHECK_S = 0.5  # how often a watched vault is checked to be the folder watched
# steps watchfiles takes after a change the gate saw before it waits on the gate again: it
# hands a batch over once a step saw nothing new, two or three steps after the change
ACTIVE_STEPS = 5


def _identity(vault: Path) -> tuple[int, int] | None:
    """(device, inode) of the vault folder; None when there is no folder there."""
    try:
        s = os.stat(vault)
    except OSError:
        return None
    return (s.st_dev, s.st_ino) if stat.S_ISDIR(s.st_mode) else None


class _Until:
    """The stop event of one watch of the vault (watchfiles asks ``is_set`` every step):
    set when the watcher stops, or when the folder at the vault's path is no longer the
    one watched. inotify watches an inode, not a path: a vault removed and put back (a
    copy, a restored backup, a re-mounted disk) is a new folder its watch never sees, and
    without this the watcher went on as if nothing had happened, blind to every edit.

    With a ``gate`` (replica/watch/gate.py) it is also where an idle watcher sleeps:
    watchfiles takes ``active_steps`` steps after each change the gate saw (steps, not
    time: a loaded machine stretches a step, never skips one), and between changes
    ``is_set`` blocks on the gate (at most until the next identity check), so a quiet vault
    costs no wake-ups (docs/decisions.md D141); a stop ends the wait at once
    (``Gate.wake_on``)."""

    def __init__(self, stop: threading.Event, vault: Path, ident: tuple[int, int] | None,
                 gate: Gate | None = None, active_steps: int = ACTIVE_STEPS):
        self.stop, self.vault, self.ident = stop, vault, ident
        self.moved = False
        self.next_check = 0.0
        self.gate, self.active_steps = gate, active_steps
        self.steps_left = 0  # steps watchfiles still takes before is_set waits on the gate

    def is_set(self) -> bool:
        if self.stop.is_set() or self.moved:
            return True
        now = time.monotonic()
        if now >= self.next_check:
            self.next_check = now + VAULT_CHECK_S
            self.moved = _identity(self.vault) != self.ident
            if self.moved:
                return True
        gate = self.gate
        if gate is None or gate.broken:
            return False
        if gate.wait(0):  # a change: watchfiles steps until it has handed it over
            self.steps_left = self.active_steps
        elif self.steps_left > 0:
            self.steps_left -= 1
        elif gate.wait(self.next_check - now):
            self.steps_left = self.active_steps
        # (after a quiet wait, watchfiles still looks at what it collected: a change the
        # gate missed is handed over at the latest at the next identity check)
        return self.stop.is_set()


def files_thread(vault: Path, inbox: queue.Queue[tuple[Any, ...]],
                 stop: threading.Event, step_ms: int = 10) -> None:
    """Vault file events (inotify through watchfiles) → ``("local", n, paths)``; a
    reader's cookie file → ``("cookie", name)``; ``("armed",)`` once events flow (our own
    cookie came back), ``("files_down",)`` when watching stops (the journal has a gap).
    The vault folder gone → ``("vault", "gone")``, watched again once a folder is back at
    its path → ``("vault", "back")`` (then ``("armed",)`` again)."""
    gone = False
    while True:
        # a vault that is gone (moved, a disk not mounted) is waited for, never made here:
        # the syncs refuse it meanwhile (vault_missing, replica/vault/presence.py)
        while (ident := _identity(vault)) is None:
            if not gone:
                gone = True
                inbox.put(("vault", "gone"))
            if stop.wait(VAULT_WAIT_S):
                inbox.put(("files_down",))
                return
        if gone:
            gone = False
            log.info("the vault folder is back: watching it again")
            inbox.put(("vault", "back"))
        gate = Gate.open(os.fspath(vault))
        if gate is not None:
            gate.wake_on(stop)
        until = _Until(stop, vault, ident, gate)
        try:
            failed = _watch_once(vault, inbox, until, step_ms)
        finally:
            if gate is not None:
                gate.close()
        if stop.is_set():
            return
        if _identity(vault) == ident:  # watching failed on the folder still there
            if failed:
                return
            continue
        log.info("the vault folder is gone or was replaced: re-arming its file watch")
        gone = True
        inbox.put(("vault", "gone"))


def _watch_once(vault: Path, inbox: queue.Queue[tuple[Any, ...]], until: _Until,
                step_ms: int) -> bool:
    """Watch the vault folder that is there now until ``until`` is set; True when watching
    failed (logged). Ends with ``("files_down",)``: the journal has a gap."""
    from watchfiles import Change, watch

    armed = threading.Event()
    mine = f"{COOKIE}armed-{os.getpid()}-{id(inbox)}"

    def arm() -> None:  # watchfiles arms inotify inside the generator: poke until it sees
        path = vault / mine
        while not armed.is_set() and not until.is_set():
            try:
                path.write_bytes(b"")
            except OSError:
                pass
            armed.wait(0.2)
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass

    threading.Thread(target=arm, name="files-arm", daemon=True).start()
    try:
        # watchfiles yields once a step passed with no new change (or ``debounce`` after
        # the first): the watcher's own debounce then decides when to publish
        root = os.fspath(vault)
        for changes in watch(vault, stop_event=until, debounce=50, step=step_ms,
                             raise_interrupt=False):
            # every path a walk would look at, files and folders (the journal), and the
            # entry files in a folder just made (they may have raised no event of their own)
            found = {p for _, p in changes if _journaled(root, p)}
            found |= _files_in_new_folders(vault, changes)
            paths = sorted(found)
            if paths:  # before any cookie of the same batch: the reader then sees them
                log.debug("vault event: %d path(s)", len(paths))
                inbox.put(("local", len(paths), paths))
            if len(changes) >= OVERFLOW_HINT:  # the journal may have lost events: rescan
                log.info("vault event burst (%d paths): the journal restarts", len(changes))
                inbox.put(("armed",))
            for change, p in sorted(changes):
                name = os.path.basename(p)
                if change != Change.deleted and name.startswith(COOKIE):
                    if name == mine and not armed.is_set():
                        armed.set()
                        inbox.put(("armed",))
                    elif name != mine:
                        inbox.put(("cookie", name))
        return False
    except Exception:  # the polling fallback still publishes local edits
        if _identity(vault) != until.ident:
            return False  # the folder went away under the watch: the caller re-arms
        log.exception("vault watching stopped")
        return True
    finally:
        armed.set()
        inbox.put(("files_down",))


def _files_in_new_folders(vault: Path, changes: Any) -> set[str]:
    """Entry files inside folders that were just created. The watch on a new folder is
    added only after its creation is seen, so a file written into it at once (the first
    page/ entry of a vault) may raise no event of its own: it was missed about one time in
    four here, and waited for the next idle poll."""
    from watchfiles import Change

    out: set[str] = set()
    for change, p in changes:
        if change == Change.added and os.path.isdir(p):
            out |= {os.fspath(f) for f in Path(p).rglob("*.md")
                    if _is_entry_file(vault, os.fspath(f))}
    return out


def _only_of(space: Any) -> tuple[str, ...]:
    """A partial replica's globs, as its store holds them when the watcher starts."""
    from replica.engine.scoped import only_of
    from replica.store.store import Store

    if not Path(space.store_path).exists():
        return ()
    store = Store(space.store_path)
    try:
        return only_of(store)
    finally:
        store.close()


def stream_thread(make_client: Callable[[], Any], space_id: str,
                  inbox: queue.Queue[tuple[Any, ...]], stop: threading.Event,
                  kick: threading.Event, settings: WatchSettings,
                  only: tuple[str, ...] = ()) -> None:
    """The hub's event stream → ``("remote", head)``, ``("stream", up|down, error)``,
    ``("refused", code, message)``, ``("unavailable", message)``; reconnects with its own paced backoff. A head event
    whose signed head does not verify with the pinned key ends the stream (``error``:
    ``hub_unverified``, shown as the status's ``stream_error``): an unsigned claim is not
    even a hint to sync. ``only``: a partial replica's globs (its stream is scoped: bare
    heads, replica/engine/scoped.py)."""
    pace = Backoff(settings.backoff_initial_ms, settings.backoff_max_ms, settings.backoff_jitter)
    while not stop.is_set():
        wait_ms: float = 0
        up = False
        error: dict[str, Any] | None = None
        try:
            client = make_client()
            try:
                for ev in client.events(space_id, read_timeout=settings.stream_read_timeout_s,
                                        only=only):
                    if stop.is_set():
                        return
                    kind, data = ev.get("event"), ev.get("data") or {}
                    if kind == "head":  # a head the pinned key did not sign is no hint
                        client.verified_head(data, space_id)
                    if not up:
                        up = True
                        pace.reset()
                        inbox.put(("stream", "up"))
                    if kind == "head":
                        inbox.put(("remote", data))
                    elif kind == "epoch":
                        inbox.put(("remote", {"epoch": data.get("epoch"), "seq": 0}))
                    elif kind == "unavailable":  # the hub cannot reach its database
                        inbox.put(("unavailable", data.get("message", "hub unavailable")))
                    elif kind == "revoked":
                        inbox.put(("refused", data.get("code", "forbidden"),
                                   data.get("message", "access revoked")))
                        wait_ms = settings.suspended_retry_ms
                        break
            finally:
                client.close()
            if not wait_ms:
                wait_ms = pace.next()
        except Exception as e:  # noqa: BLE001 - the watcher decides; this thread reconnects
            if refused(e):
                inbox.put(("refused", getattr(e, "code", "forbidden"),
                           getattr(e, "message", str(e))))
                wait_ms = settings.suspended_retry_ms
            elif isinstance(e, QuireError) and not e.retryable:  # the hub's answer lies
                error = {"code": e.code, "message": e.message, "details": dict(e.details)}
                log.warning("event stream refused (%s: %s); polling until it is back",
                            e.code, e.message)
                wait_ms = pace.next()
            else:
                log.info("event stream dropped (%s); polling until it is back",
                         type(e).__name__)
                wait_ms = pace.next()
        inbox.put(("stream", "down", error))
        if kick.wait(wait_ms / 1000):
            kick.clear()


@dataclass
class Running:
    name: str
    watcher: Watcher
    inbox: queue.Queue[tuple[Any, ...]]
    lock: WatchLock
    threads: list[threading.Thread]
    syncer: SpaceSyncer
    server: SocketServer | None = None



def start(home: Any, space: Any, settings: WatchSettings, stop: threading.Event,
          serve: Callable[..., int] | None = None, teller: Teller | None = None) -> Running:
    """Take the space's watcher lock and start its threads; with ``serve`` (the CLI's
    ``main``), answer ``quire status``/``sync`` on the space's socket (replica/watch/server.py);
    ``teller`` says what happens (replica/watch/activity.py)."""

    lock = WatchLock(lock_path(space))
    inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
    kick = threading.Event()
    syncer = SpaceSyncer(home, space)
    board = Board()  # cookies of the readers this process serves (replica/ipc/journal.py)
    watcher = Watcher(sync=syncer, on_cookie=board.ack,
                      write_status=lambda doc: write_json(status_path(space), dict(
                          doc, space={"id": space.space_id, "name": space.name}),
                          durable=False),  # advisory, rewritten at every change
                      settings=settings, on_resume=kick.set, apply=syncer.apply,
                      own=syncer.own_writes, vault=os.fspath(space.vault),
                      on_refused=lambda code, message: _record_refusal(space, code, message),
                      tell=teller.tell if teller is not None else None)
    lock.acquire(watcher.started_at)
    hub = home.hub(space.hub_id)

    def make_client() -> Any:
        c = service.open_client(hub)
        c.replica_id = space.replica_id  # the stream names this replica (refused if revoked)
        return c

    threads = [
        threading.Thread(target=watcher.run, args=(inbox, stop), name=f"watch-{space.name}"),
        threading.Thread(target=stream_thread, args=(make_client, space.space_id, inbox, stop,
                                                     kick, settings, _only_of(space)),
                         name=f"events-{space.name}", daemon=True),
        threading.Thread(target=files_thread, args=(Path(space.vault), inbox, stop,
                                                    settings.files_step_ms),
                         name=f"files-{space.name}", daemon=True),
    ]
    for t in threads:
        t.start()
    server = SocketServer(home.root, space, syncer, serve) if serve is not None else None
    if server is not None and not server.start():
        server = None
    BOARDS[space.space_id] = board
    return Running(space.name, watcher, inbox, lock, threads, syncer, server)


def _record_refusal(space: Any, code: str, message: str) -> None:
    """The hub refused this replica (its event stream said so): keep it in the space's
    status record, as a refused sync does, so `quire status` still says `suspended` after
    the watcher stops. The next successful sync clears it."""
    from replica.app.service import write_status
    from shared.errors import from_wire

    try:
        write_status(space, report=None, role=None,
                     error=from_wire(403, {"error": {"code": code, "message": message}}))
    except OSError as e:
        log.warning("could not record the refusal: %s", e)


def run_watch(home: Any, spaces: list[Any], settings: WatchSettings | None = None,
              say: Callable[[str], None] = print, serve: Callable[..., int] | None = None,
              notify: bool = False) -> int:
    """``quire watch``: watch every space given until SIGINT/SIGTERM; one line per pull,
    push, conflict and refusal on ``say`` and in each space's ``watch.log``, and with
    ``notify`` a desktop notification where one is available (replica/watch/activity.py)."""
    import signal

    logging.basicConfig(level=os.environ.get("QUIRE_LOG_LEVEL", "WARNING").upper(),
                         format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = settings or WatchSettings.from_env()
    stop = threading.Event()
    running: list[Running] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        for r in running:
            r.inbox.put(("stop",))

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    from replica.vault.files import ignore_lease_breaks

    ignore_lease_breaks()  # the syncs' threads ask the kernel who writes a file (leases)
    try:
        for space in spaces:
            teller = Teller(space.name, Path(space.dir) / "watch.log", say=say, notify=notify)
            running.append(start(home, space, settings, stop, serve, teller))
            say(f"watching {space.name} ({space.vault})")
        while not stop.is_set():
            stop.wait(1.0)
            if running and not any(r.threads[0].is_alive() for r in running):
                break
        for r in running:  # the sync in flight finishes; then each writes 'stopped'
            if r.server is not None:
                r.server.stop()
            r.inbox.put(("stop",))
        for r in running:
            r.threads[0].join(timeout=60)
            r.syncer.close()
            # the files thread leaves watchfiles' Rust loop before the interpreter ends: a
            # daemon thread woken inside it during finalization aborts the process
            r.threads[2].join(timeout=2)
        say("watcher stopped")
        return 0
    finally:
        stop.set()
        for r in running:
            if r.server is not None:
                r.server.stop()
            BOARDS.pop(r.syncer.space.space_id, None)
            r.lock.release()
        for s, h in old.items():
            signal.signal(s, h)
