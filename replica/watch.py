"""The watcher: keeps one joined space current without anyone typing ``quire sync``.

    hub /events (SSE) ──► stream thread ──┐
    vault file events ──► files thread  ──┼──► inbox ──► Watcher (one thread) ──► sync
    signals ─────────────────────────────┘                   │
                                                             └──► watch.json (status)

- A head event that is not the replica's head asks for a sync at once. When the stream
  drops, the watcher polls (a sync now, then every ``poll_ms``) until the stream is back.
- Vault edits are debounced (``debounce_ms`` after the last event, at most
  ``debounce_max_ms`` after the first) so an editor's burst of saves becomes one batch.
  Before going to the hub, the watcher scans the vault: events caused by its own vault
  writes find nothing to publish and cost no request.
- Errors back off exponentially from ``backoff_initial_ms`` to ``backoff_max_ms``, each
  delay drawn from ``[base·(1-jitter), base]`` so a hub restart is not met by every replica
  at the same instant; the first success resets it.
- Refused access (``unauthorized``, ``forbidden``, or ``not_found`` for a space we joined,
  which is how the hub says "not a member") suspends: nothing local is touched, the outbox
  stays, and the watcher only retries every ``suspended_retry_ms`` until access returns.
- SIGINT/SIGTERM: the sync in flight finishes (its outbox batch is saved before sending, so
  even a kill is recovered by replay), the status says ``stopped``, the lock is released.

The decision logic (``Backoff``, ``Debouncer``, ``Watcher.handle``/``tick``) reads an
injected clock and never sleeps, so it is tested by moving a fake clock.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from shared.errors import (
    Forbidden,
    LockHeld,
    NotFound,
    PolicyDenied,
    QuireError,
    Unauthorized,
)

log = logging.getLogger("quire.watch")

STATES = ("idle", "syncing", "backoff", "suspended", "conflicts", "stopped")
HISTORY = 32  # backoff delays kept in the status file


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- settings


@dataclass
class WatchSettings:
    """Every pace of the watcher; environment ``QUIRE_WATCH_<NAME>`` overrides a default."""

    debounce_ms: int = 500  # quiet time after the last vault event before publishing
    debounce_max_ms: int = 5000  # publish at the latest this long after the first event
    backoff_initial_ms: int = 500  # first delay after an error
    backoff_max_ms: int = 60_000  # cap of the exponential backoff
    backoff_jitter: float = 0.5  # each delay is drawn from [base*(1-jitter), base]
    poll_ms: int = 10_000  # sync this often while the event stream is down
    # and this often while it is up: only a safety net, since an open stream already gets
    # the current head whenever the hub re-checks it (events_recheck_ms)
    idle_poll_ms: int = 1_800_000
    suspended_retry_ms: int = 60_000  # retry this often while access is refused
    stream_read_timeout_s: float = 60.0  # no byte (not even a keep-alive) this long: drop

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WatchSettings:
        source: Mapping[str, str] = os.environ if env is None else env
        s = cls()
        for f in fields(cls):
            raw = source.get(f"QUIRE_WATCH_{f.name.upper()}")
            if raw is not None:
                kind = type(getattr(s, f.name))
                setattr(s, f.name, kind(raw))
        return s


# ---------------------------------------------------------------- pure pacing


class Backoff:
    """Exponential backoff with jitter, capped; ``reset`` after a success."""

    def __init__(self, initial_ms: int, max_ms: int, jitter: float,
                 rand: Callable[[], float] = random.random):
        self.initial_ms, self.max_ms, self.jitter, self.rand = initial_ms, max_ms, jitter, rand
        self.attempt = 0

    def base(self, attempt: int) -> int:
        return min(self.max_ms, self.initial_ms * (2 ** min(attempt, 40)))

    def bounds(self, attempt: int) -> tuple[int, int]:
        b = self.base(attempt)
        return int(b * (1 - self.jitter)), b

    def next(self) -> int:
        b = self.base(self.attempt)
        self.attempt += 1
        return int(b - b * self.jitter * self.rand())

    def reset(self) -> None:
        self.attempt = 0


class Debouncer:
    """Due ``delay_ms`` after the last touch, or ``max_ms`` after the first, whichever first."""

    def __init__(self, delay_ms: int, max_ms: int, clock: Callable[[], int]):
        self.delay_ms, self.max_ms, self.clock = delay_ms, max_ms, clock
        self.first: int | None = None
        self.last: int | None = None

    def touch(self) -> None:
        now = self.clock()
        if self.first is None:
            self.first = now
        self.last = now

    @property
    def pending(self) -> bool:
        return self.first is not None

    def deadline(self) -> int | None:
        if self.first is None or self.last is None:
            return None
        return min(self.last + self.delay_ms, self.first + self.max_ms)

    def due(self) -> bool:
        d = self.deadline()
        return d is not None and self.clock() >= d

    def clear(self) -> None:
        self.first = self.last = None


# ---------------------------------------------------------------- the watcher


@dataclass
class SyncResult:
    head: dict[str, Any] | None  # {"epoch", "seq", ...} of the replica after the sync
    outbox: int
    conflicts: int
    skipped: bool = False  # a local trigger found nothing to publish: no request made


def refused(e: BaseException) -> bool:
    """The hub says this caller may not have the space (any more): suspend, keep all."""
    return isinstance(e, Unauthorized | NotFound) or (
        isinstance(e, Forbidden) and not isinstance(e, PolicyDenied))


@dataclass
class Watcher:
    """The decision core of one space's watcher. ``handle`` takes inbox messages, ``tick``
    runs a sync when one is due, ``next_wake`` says when to call ``tick`` again."""

    sync: Callable[[bool], SyncResult]  # sync(local_only): run one locked sync
    write_status: Callable[[dict[str, Any]], None]
    settings: WatchSettings = field(default_factory=WatchSettings)
    clock: Callable[[], int] = now_ms
    rand: Callable[[], float] = random.random
    on_resume: Callable[[], None] = lambda: None  # tell the stream thread to reconnect now
    # apply(lines): apply changes that came with head events (None: not possible, sync)
    apply: Callable[[list[dict[str, Any]]], SyncResult | None] | None = None
    # own(paths): these vault files show what this replica wrote (no edit to publish)
    own: Callable[[list[str]], bool] | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.backoff = Backoff(s.backoff_initial_ms, s.backoff_max_ms, s.backoff_jitter,
                               self.rand)
        self.debounce = Debouncer(s.debounce_ms, s.debounce_max_ms, self.clock)
        self.state = "idle"
        self.started_at = self.clock()
        self.want_sync = True  # catch up once at start
        self.retry_at: int | None = None  # backoff or suspension: no sync before this
        self.suspended = False
        self.stream_up = False
        self.next_poll_at = self.clock()
        self.last_sync_at: int | None = None
        self.last_success: int | None = None
        self.last_error: dict[str, Any] | None = None
        self.delays: list[list[int]] = []  # [attempt, delay ms], newest last
        self.head: dict[str, Any] | None = None
        self.hub_head: dict[str, Any] | None = None
        self.behind_since: int | None = None
        self.outbox = 0
        self.conflicts = 0
        self.syncs = 0
        self.applied = 0  # head events applied from their own changes (no request)
        self.scans = 0  # local-only syncs (vault events that were not our own writes)
        self.delivered: dict[int, dict[str, Any]] = {}  # seq -> change line from an event
        self.delivered_epoch: str | None = None

    # ------------------------------------------------------------ inputs

    def handle(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        now = self.clock()
        if kind == "remote":  # a head event: {"space", "epoch", "seq", "digest"}
            h = msg[1]
            log.debug("head event seq %s (at %s)", h.get("seq"), h.get("at"))
            self.hub_head = {"epoch": h.get("epoch"), "seq": h.get("seq")}
            self._keep_changes(h)
            if not self._has(self.hub_head):
                self.want_sync = True
                if self.behind_since is None:
                    self.behind_since = now
                if not self.suspended and self.retry_at is None:
                    return  # the tick that follows at once writes the status
        elif kind == "local":
            paths = msg[2] if len(msg) > 2 else None
            if paths and self.own is not None and not self.debounce.pending:
                try:
                    if self.own(paths):
                        return  # our own vault writes: nothing to publish, no status write
                except Exception:  # noqa: BLE001 - when unsure, the scan decides
                    log.debug("could not check vault events", exc_info=True)
            self.debounce.touch()
        elif kind == "stream":
            up = msg[1] == "up"
            if up and not self.stream_up and self.retry_at is not None and not self.suspended:
                self.retry_at = now  # the hub is back: do not sit out the backoff
            if not up and self.stream_up:
                self.next_poll_at = now  # we may have missed heads: poll at once
            self.stream_up = up
        elif kind == "refused":  # the stream said access is gone
            self._suspend(msg[1], msg[2] if len(msg) > 2 else "access refused")
        self._status()

    def _keep_changes(self, h: dict[str, Any]) -> None:
        """Remember the change lines a head event carried (by seq, one epoch)."""
        lines = h.get("changes")
        if h.get("epoch") != self.delivered_epoch:
            self.delivered = {}
            self.delivered_epoch = h.get("epoch")
        if not isinstance(lines, list):
            return
        for line in lines:
            if isinstance(line, dict) and isinstance(line.get("seq"), int):
                self.delivered[line["seq"]] = line
        if len(self.delivered) > 256:  # far behind: the full sync pulls them anyway
            self.delivered = {}

    def _has(self, hub: dict[str, Any]) -> bool:
        h = self.head
        return h is not None and h.get("epoch") == hub.get("epoch") and int(
            h.get("seq", -1)) >= int(hub.get("seq") or 0)

    # ------------------------------------------------------------ timing

    def next_wake(self) -> int:
        """When ``tick`` has something to do next (Unix ms)."""
        if self.suspended or self.retry_at is not None:
            return self.retry_at or self.clock()
        if self.want_sync:
            return self.clock()
        wakes = [self.next_poll_at]
        d = self.debounce.deadline()
        if d is not None:
            wakes.append(d)
        return min(wakes)

    def due(self) -> tuple[bool, bool]:
        """(a sync is due, it is only for local edits)."""
        now = self.clock()
        if self.suspended or self.retry_at is not None:
            return (self.retry_at is not None and now >= self.retry_at), False
        if self.want_sync or now >= self.next_poll_at:
            return True, False
        if self.debounce.due():
            return True, True
        return False, False

    # ------------------------------------------------------------ the sync

    def tick(self) -> None:
        go, local_only = self.due()
        if not go:
            return
        if self._apply_delivered(local_only):
            return
        self.delivered = {}  # a full sync pulls whatever they held
        if not self.suspended:  # a probe while suspended stays 'suspended' until it works
            self.state = "syncing"
            self._status()
        self.debounce.clear()  # edits from now on start a new window
        self.want_sync = False
        started = self.clock()
        self.scans += 1 if local_only else 0
        log.debug("sync start (local_only=%s)", local_only)
        try:
            res = self.sync(local_only)
        except LockHeld:
            self.retry_at = self.clock() + 250  # a manual 'quire sync' is running
            self.want_sync = True
            self._status()
            return
        except Exception as e:  # noqa: BLE001 - every failure is paced, none kills the loop
            self._failed(e)
            return
        self.syncs += 0 if res.skipped else 1
        log.debug("sync done in %d ms (skipped=%s)", self.clock() - started, res.skipped)
        self._succeeded(res, started)

    def _apply_delivered(self, local_only: bool) -> bool:
        """The fast path: apply the changes that came with head events, when nothing local
        is waiting and nothing is unusual; False: run the full sync as usual."""
        if (not self.delivered or self.apply is None or local_only or not self.want_sync
                or self.suspended or self.retry_at is not None or self.debounce.pending):
            return False
        lines = [self.delivered[k] for k in sorted(self.delivered)]
        self.delivered = {}
        started = self.clock()
        try:
            res = self.apply(lines)
        except LockHeld:
            return False  # the full sync meets it too and paces itself
        except Exception as e:  # noqa: BLE001 - gap, failed check, I/O: the full sync decides
            log.info("changes from the event not applied (%s: %s); syncing", type(e).__name__, e)
            return False
        if res is None:
            return False
        self.want_sync = False
        self.applied += 1
        log.debug("applied %d delivered change(s) in %d ms", len(lines),
                  self.clock() - started)
        self._succeeded(res, started)
        return True

    def _succeeded(self, res: SyncResult, started: int) -> None:
        now = self.clock()
        if self.suspended:
            log.info("access is back: resuming")
            self.on_resume()
        self.suspended = False
        self.retry_at = None
        self.backoff.reset()
        self.last_sync_at = started
        self.last_success = now
        self.last_error = None
        if not res.skipped:
            self.head, self.outbox, self.conflicts = res.head, res.outbox, res.conflicts
            poll = self.settings.idle_poll_ms if self.stream_up else self.settings.poll_ms
            self.next_poll_at = now + poll
            if self.hub_head is not None and not self._has(self.hub_head):
                self.want_sync = True  # a head arrived while we synced
            else:
                self.behind_since = None
        else:
            self.outbox, self.conflicts = res.outbox, res.conflicts
        self.state = "conflicts" if self.conflicts else "idle"
        self._status()

    def _failed(self, e: BaseException) -> None:
        now = self.clock()
        code = e.code if isinstance(e, QuireError) else "local_error"
        message = e.message if isinstance(e, QuireError) else f"{type(e).__name__}: {e}"
        if refused(e):
            self._suspend(code, message)
            return
        attempt = self.backoff.attempt
        delay = self.backoff.next()
        self.delays = (self.delays + [[attempt, delay]])[-HISTORY:]
        self.retry_at = now + delay
        self.state = "backoff"
        self.last_error = {"code": code, "message": message, "at": now,
                           "retryable": bool(getattr(e, "retryable", True))}
        log.warning("sync failed (%s: %s); retrying in %d ms", code, message, delay)
        self._status()

    def _suspend(self, code: str, message: str) -> None:
        now = self.clock()
        if not self.suspended:
            log.warning("access refused (%s: %s): suspended, everything local is kept",
                        code, message)
        self.suspended = True
        self.state = "suspended"
        self.retry_at = now + self.settings.suspended_retry_ms
        self.last_error = {"code": code, "message": message, "at": now, "retryable": False}
        self._status()

    # ------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        now = self.clock()
        hub_seq = self.hub_head.get("seq") if self.hub_head else None
        seq = self.head.get("seq") if self.head else None
        same_epoch = bool(self.hub_head and self.head
                          and self.hub_head.get("epoch") == self.head.get("epoch"))
        return {
            "state": self.state,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "updated_at": now,
            "stream": "up" if self.stream_up else "down",
            "last_sync": self.last_sync_at,
            "last_success": self.last_success,
            "last_error": self.last_error,
            "next_retry": self.retry_at,
            "outbox": self.outbox,
            "conflicts": self.conflicts,
            "head": ({"epoch": self.head.get("epoch"), "seq": seq} if self.head else None),
            "hub_head": self.hub_head,
            "lag": {"seq": (max(0, int(hub_seq) - int(seq)) if same_epoch and hub_seq is not None
                            and seq is not None else None),
                    "ms": (now - self.behind_since) if self.behind_since is not None else 0},
            "backoff": {"attempt": self.backoff.attempt, "delays": list(self.delays),
                        "initial_ms": self.settings.backoff_initial_ms,
                        "max_ms": self.settings.backoff_max_ms,
                        "jitter": self.settings.backoff_jitter},
            "syncs": self.syncs,
            "applied": self.applied,
            "scans": self.scans,
        }

    def _status(self) -> None:
        try:
            self.write_status(self.status())
        except OSError:
            log.exception("could not write the status file")

    # ------------------------------------------------------------ the loop

    def run(self, inbox: queue.Queue[tuple[Any, ...]], stop: threading.Event) -> None:
        """Process the inbox and sync when due, until ``stop`` (real clock only)."""
        self._status()
        while not stop.is_set():
            self.tick()
            wait = max(0.0, (self.next_wake() - self.clock()) / 1000)
            try:
                msg = inbox.get(timeout=min(wait, 1.0))
            except queue.Empty:
                continue
            if msg[0] == "stop":
                break
            self.handle(msg)
            while True:  # drain what arrived together: one sync for a burst
                try:
                    msg = inbox.get_nowait()
                except queue.Empty:
                    break
                if msg[0] == "stop":
                    stop.set()
                    break
                self.handle(msg)
        self.state = "stopped"
        self._status()


# ---------------------------------------------------------------- the lock


class WatchLock:
    """One watcher per space: an flock on ``<space>/watch.lock`` held for the process's life;
    the file says who holds it (pid, started_at, host)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self, started_at: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
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


# ---------------------------------------------------------------- the daemon (I/O shell)


def _is_entry_file(vault: Path, p: str) -> bool:
    if not p.endswith(".md"):
        return False
    try:
        rel = Path(p).relative_to(vault)
    except ValueError:
        return False
    return not any(part.startswith(".") for part in rel.parts)


def files_thread(vault: Path, inbox: queue.Queue[tuple[Any, ...]],
                 stop: threading.Event) -> None:
    """Vault file events (inotify through watchfiles) → ``("local", n)``."""
    from watchfiles import watch

    vault.mkdir(parents=True, exist_ok=True)
    try:
        for changes in watch(vault, stop_event=stop, debounce=50, step=20,
                             raise_interrupt=False):
            paths = sorted({p for _, p in changes if _is_entry_file(vault, p)})
            if paths:
                inbox.put(("local", len(paths), paths))
    except Exception:  # the polling fallback still publishes local edits
        log.exception("vault watching stopped")


def stream_thread(make_client: Callable[[], Any], space_id: str,
                  inbox: queue.Queue[tuple[Any, ...]], stop: threading.Event,
                  kick: threading.Event, settings: WatchSettings) -> None:
    """The hub's event stream → ``("remote", head)``, ``("stream", up|down)``,
    ``("refused", code, message)``; reconnects with its own paced backoff."""
    pace = Backoff(settings.backoff_initial_ms, settings.backoff_max_ms, settings.backoff_jitter)
    while not stop.is_set():
        wait_ms: float = 0
        up = False
        try:
            client = make_client()
            try:
                for ev in client.events(space_id, read_timeout=settings.stream_read_timeout_s):
                    if stop.is_set():
                        return
                    if not up:
                        up = True
                        pace.reset()
                        inbox.put(("stream", "up"))
                    kind, data = ev.get("event"), ev.get("data") or {}
                    if kind == "head":
                        inbox.put(("remote", data))
                    elif kind == "epoch":
                        inbox.put(("remote", {"epoch": data.get("epoch"), "seq": 0}))
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
            else:
                log.info("event stream dropped (%s); polling until it is back",
                         type(e).__name__)
                wait_ms = pace.next()
        inbox.put(("stream", "down"))
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


def status_path(space: Any) -> Path:
    return Path(space.dir) / "watch.json"


def lock_path(space: Any) -> Path:
    return Path(space.dir) / "watch.lock"


class SpaceSyncer:
    """Locked syncs of one space for its watcher, through the same engine and status file
    as ``quire sync`` (so ``quire status`` agrees). The replica, its hub client (one TLS
    context, one connection pool, one token refresher) and its store stay open between
    syncs: a sync after a head event then costs two requests and the vault work, nothing
    more. ``local_only``: scan the vault first and skip the hub when nothing local changed
    (our own vault writes wake the file watcher too)."""

    def __init__(self, home: Any, space: Any):
        self.home, self.space = home, space
        self._parts: tuple[Any, Any, Any] | None = None
        self._warm: Any = None
        # path -> (size, mtime_ns) of a file the fast path wrote (None: removed), recorded
        # only when the file holds exactly what was journaled: its own events match it
        self._wrote: dict[str, tuple[int, int] | None] = {}

    def _open(self) -> tuple[Any, Any, Any]:
        from replica import cli

        if self._parts is None:
            self._parts = cli._replica(self.home, self.space)
            # one idle connection (no transaction, no lock) held while the watcher runs:
            # the store opens a connection per transaction, and SQLite makes the close of
            # the last one checkpoint the WAL (fsyncs) and the next open recover it
            self._warm = self._parts[2].engine.connect()
        return self._parts

    def close(self) -> None:
        if self._parts is not None:
            _, client, store = self._parts
            if self._warm is not None:
                self._warm.close()
                self._warm = None
            client.close()
            store.close()
            self._parts = None

    def apply(self, lines: list[dict[str, Any]]) -> SyncResult | None:
        """Apply changes that came with head events, as the pull of a full sync would:
        verified by the client's own ``changes`` checks (each batch parsed, its digest
        recomputed, chained onto this replica's head), merged by the engine's own
        ``_apply_change_txn``, all in one store transaction, then written to the vault.
        None (the caller runs a full sync) when they do not start right after the head,
        or when anything local is pending: an outbox, dirty entries, held conflicts,
        journaled vault writes. Raises ``HubUnverified`` when they do not verify."""
        from replica import cli
        from replica import store as st
        from replica.client import HubClient
        from replica.home import space_lock
        from replica.sync import SyncReport

        with space_lock(self.space):
            rep, _, store = self._open()
            report = SyncReport()
            try:
                with store.tx() as conn:  # the checks and the apply: one transaction
                    head = st.head_txn(conn)
                    if head is None:
                        return None
                    lines = [c for c in lines if int(c["seq"]) > head.seq]
                    if not lines or lines[0]["seq"] != head.seq + 1:
                        return None  # a gap (or nothing new): only a pull can tell
                    if _local_pending_txn(conn):
                        return None
                    page = HubClient.changes(_Delivered(lines),  # type: ignore[arg-type]
                                             self.space.space_id, epoch=head.epoch,
                                             after=head.seq, after_digest=head.digest)
                    for change in page.changes:
                        rep._apply_change_txn(conn, change, report)
                expected = {eid: content for eid, content, _prev in
                            store.pending_vault_writes()}
                rep.flush_vault()
                self._remember_writes(expected)
            except QuireError:
                raise  # nothing applied (HubUnverified: the full sync pulls and checks)
            except Exception:
                self.close()  # something unexpected: start from fresh objects next time
                raise
            cli._write_status(self.space, report=None, error=None, role=None)
            last = page.changes[-1]
            return SyncResult({"epoch": head.epoch, "seq": last.seq, "digest": last.head},
                              0, len(report.held))

    def _remember_writes(self, expected: dict[str, str | None]) -> None:
        from replica import vault as vlt

        if len(self._wrote) > 10_000:
            self._wrote.clear()
        vault = Path(self.space.vault)
        for entry_id, content in expected.items():
            path = os.fspath(vlt.entry_path(vault, entry_id))
            self._wrote.pop(path, None)
            try:
                stat = os.lstat(path)
            except FileNotFoundError:
                if content is None:
                    self._wrote[path] = None
                continue
            if (content is not None and os.path.isfile(path) and not os.path.islink(path)
                    and stat.st_size == len(data := content.encode("utf-8"))
                    and Path(path).read_bytes() == data):
                self._wrote[path] = (stat.st_size, stat.st_mtime_ns)

    def _known_write(self, path: str) -> bool:
        if path not in self._wrote:
            return False
        want = self._wrote[path]
        try:
            stat = os.lstat(path)
        except FileNotFoundError:
            ours = want is None
        else:
            ours = want is not None and (stat.st_size, stat.st_mtime_ns) == want
        if not ours:  # the file moved on from what we wrote: forget it, so a later state
            del self._wrote[path]  # that happens to look like ours (a re-deletion) is seen
        return ours

    def own_writes(self, paths: list[str]) -> bool:
        """True when every path shows what the store recorded for it (the file this replica
        wrote, or no file for an entry it removed): a scan would find nothing to publish.
        Reads a few rows and stats a few files; never the whole vault."""
        if all(self._known_write(p) for p in paths):
            return True  # no database read at all
        from sqlalchemy import select

        from replica import store as st
        from replica import vault as vlt

        _, _, store = self._open()
        vault = Path(self.space.vault)
        with store.engine.connect() as conn:
            if conn.execute(select(st.vault_pending_t.c.entry_id).limit(1)).first():
                return False  # a write is still to be carried out: let the sync see it
            for p in paths:
                try:
                    rel = Path(p).relative_to(vault).as_posix()
                except ValueError:
                    return False
                entry_id, _problem = vlt.path_entry_id(rel)
                if entry_id is None:
                    return False
                s = st.get_state_txn(conn, entry_id)
                try:
                    stat = os.lstat(p)
                except FileNotFoundError:
                    if s.file_hash is not None:
                        return False  # removed by someone
                    continue
                if not os.path.isfile(p) or os.path.islink(p) or s.file_hash is None:
                    return False
                if (s.file_size, s.file_mtime_ns) == (stat.st_size, stat.st_mtime_ns):
                    continue
                if vlt.file_hash(Path(p).read_bytes()) != s.file_hash:
                    return False
        return True

    def __call__(self, local_only: bool) -> SyncResult:
        from replica import cli
        from replica.home import space_lock
        from replica.sync import SyncReport

        with space_lock(self.space):
            rep, _, store = self._open()
            try:
                if local_only:
                    self.space.vault.mkdir(parents=True, exist_ok=True)
                    rep.flush_vault()
                    rep.scan(SyncReport())
                    if not store.dirty_count() and not store.outbox():
                        return SyncResult(None, 0, len(store.conflicts()), skipped=True)
                try:
                    report = rep.sync()
                except QuireError as e:
                    cli._write_status(self.space, report=None, error=e, role=rep.role)
                    raise
                cli._write_status(self.space, report=report, error=None, role=rep.role)
                head = store.head()
                return SyncResult(head.to_json() if head else None, store.dirty_count(),
                                  len(store.conflicts()))
            except QuireError:
                raise
            except Exception:
                self.close()  # something unexpected: start from fresh objects next time
                raise


def _local_pending_txn(conn: Any) -> bool:
    """Anything local the store still has to publish or show: an outbox batch, a journaled
    vault write, a held conflict, a dirty entry."""
    from replica import store as st

    tables = (st.outbox_t.name, st.vault_pending_t.name, st.conflicts_t.name)
    any_row = conn.exec_driver_sql(
        "SELECT " + " OR ".join(f"EXISTS (SELECT 1 FROM {t})" for t in tables)).scalar()
    return bool(any_row or st.dirty_states_txn(conn))


class _Delivered:
    """Stands in for the hub connection in ``HubClient.changes``: its lines came with head
    events, so they go through exactly the checks a pull makes."""

    def __init__(self, lines: list[dict[str, Any]]):
        self.lines = lines

    def _stream(self, path: str, params: dict[str, Any] | None = None
                ) -> Any:
        yield from self.lines
        yield {"end": {"seq": self.lines[-1]["seq"], "head_seq": self.lines[-1]["seq"],
                       "more": False}}


def start(home: Any, space: Any, settings: WatchSettings, stop: threading.Event) -> Running:
    """Take the space's watcher lock and start its threads."""
    from replica import cli
    from replica.home import write_json

    lock = WatchLock(lock_path(space))
    inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
    kick = threading.Event()
    syncer = SpaceSyncer(home, space)
    watcher = Watcher(sync=syncer,
                      write_status=lambda doc: write_json(status_path(space), dict(
                          doc, space={"id": space.space_id, "name": space.name})),
                      settings=settings, on_resume=kick.set, apply=syncer.apply,
                      own=syncer.own_writes)
    lock.acquire(watcher.started_at)
    hub = home.hub(space.hub_id)

    def make_client() -> Any:
        return cli._client(hub)

    threads = [
        threading.Thread(target=watcher.run, args=(inbox, stop), name=f"watch-{space.name}"),
        threading.Thread(target=stream_thread, args=(make_client, space.space_id, inbox, stop,
                                                     kick, settings),
                         name=f"events-{space.name}", daemon=True),
        threading.Thread(target=files_thread, args=(Path(space.vault), inbox, stop),
                         name=f"files-{space.name}", daemon=True),
    ]
    for t in threads:
        t.start()
    return Running(space.name, watcher, inbox, lock, threads, syncer)


def run_watch(home: Any, spaces: list[Any], settings: WatchSettings | None = None,
              say: Callable[[str], None] = print) -> int:
    """``quire watch``: watch every space given until SIGINT/SIGTERM."""
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
    try:
        for space in spaces:
            running.append(start(home, space, settings, stop))
            say(f"watching {space.name} ({space.vault})")
        while not stop.is_set():
            stop.wait(1.0)
            if running and not any(r.threads[0].is_alive() for r in running):
                break
        for r in running:  # the sync in flight finishes; then each writes 'stopped'
            r.inbox.put(("stop",))
        for r in running:
            r.threads[0].join(timeout=60)
            r.syncer.close()
        say("watcher stopped")
        return 0
    finally:
        stop.set()
        for r in running:
            r.lock.release()
        for s, h in old.items():
            signal.signal(s, h)


# ---------------------------------------------------------------- service files

UNIT_NAME = "quire-watch@.service"
UNIT = """\
# Written by 'quire watch --install' for this machine; remove with 'quire watch --uninstall'.
# One instance per space: systemctl --user enable --now quire-watch@SPACE
[Unit]
Description=Quire watcher for space %i
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
Environment=QUIRE_HOME={home}
ExecStart={exe} watch %i
Restart=always
# the watcher paces its own retries (backoff, suspension); this only covers crashes
RestartSec=5s
# SIGTERM: the sync in flight finishes and the status says 'stopped'
TimeoutStopSec=60s

[Install]
WantedBy=default.target
"""


def unit_dir(env: Mapping[str, str] | None = None) -> Path:
    source: Mapping[str, str] = os.environ if env is None else env
    base = source.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def quire_command() -> str:
    """How a service manager should start this very installation of quire."""
    import shutil
    import sys

    exe = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if exe is not None and exe.name == "quire" and exe.exists():
        return str(exe)
    found = shutil.which("quire")
    if found:
        return str(Path(found).resolve())
    return f"{sys.executable} -m replica.cli"


def install_unit(home_root: Path, spaces: list[str]) -> dict[str, Any]:
    """Write the systemd user unit template for this machine; say how to enable it."""
    path = unit_dir() / UNIT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(UNIT.format(home=Path(home_root).resolve(), exe=quire_command()),
                   encoding="utf-8")
    os.replace(tmp, path)
    commands = ["systemctl --user daemon-reload"] + [
        f"systemctl --user enable --now quire-watch@{s}" for s in spaces]
    return {"unit": str(path), "installed": True, "commands": commands}


def uninstall_unit(spaces: list[str]) -> dict[str, Any]:
    path = unit_dir() / UNIT_NAME
    existed = path.exists()
    if existed:
        path.unlink()
    commands = [f"systemctl --user disable --now quire-watch@{s}" for s in spaces] + [
        "systemctl --user daemon-reload"]
    return {"unit": str(path), "installed": False, "removed": existed, "commands": commands}
