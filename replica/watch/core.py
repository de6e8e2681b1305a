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
- A space deleted on the hub (a sync raised ``VerifiedDeletion``: the hub-signed statement
  verified, replica/engine/deleted.py) stops this space's watcher (state ``deleted``); nothing
  local is touched. An unsigned ``space_deleted`` is a failure like any other (backoff).
- SIGINT/SIGTERM: the sync in flight finishes (its outbox batch is saved before sending, so
  even a kill is recovered by replay), the status says ``stopped``, the lock is released.

The decision logic (``Watcher.handle``/``tick``, this module; ``Backoff``, ``Debouncer`` in
``pacing``) reads an injected clock and never sleeps, so it is tested by moving a fake
clock. Around it: ``daemon`` (threads, signals, ``run_watch``), ``syncer`` (the syncs, the
hub-event fast path), ``replica/ipc/lock.py`` (one watcher per space, where its status file
lives), ``unit`` (the systemd unit).
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from replica.engine.deleted import VerifiedDeletion
from replica.watch.activity import RECENT, Line
from replica.watch.pacing import Backoff, Debouncer
from shared.errors import (
    Forbidden,
    HubUnverified,
    LockHeld,
    NotFound,
    PolicyDenied,
    QuireError,
    Unauthorized,
)

log = logging.getLogger("quire.watch")

STATES = ("idle", "syncing", "backoff", "suspended", "conflicts", "stopped", "deleted")
HISTORY = 32  # backoff delays kept in the status file
JOURNAL_PROBLEMS_MAX = 200  # problems the status file's journal carries (more: None)


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- settings


@dataclass
class WatchSettings:
    """Every pace of the watcher; environment ``QUIRE_WATCH_<NAME>`` overrides a default."""

    # quiet time after the last vault event before publishing: an editor's save (one or
    # several writes in a row, or a temp file renamed over) is one batch, a later save
    # publishes again (docs/decisions.md, "Watcher debounce")
    debounce_ms: int = 50
    debounce_max_ms: int = 5000  # publish at the latest this long after the first event
    # the file watcher (watchfiles) hands events over once none came for this long; it
    # wakes this often even when idle
    files_step_ms: int = 10
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


# ---------------------------------------------------------------- the watcher


@dataclass
class SyncResult:
    head: dict[str, Any] | None  # {"epoch", "seq", ...} of the replica after the sync
    outbox: int
    conflicts: int
    skipped: bool = False  # a local trigger found nothing to publish: no request made
    pending: list[str] = field(default_factory=list)  # entry ids still unpublished after it
    # where its vault scan found files it cannot publish (relative paths): a scan by the
    # journal looks there again, as a walk would
    problem_paths: list[str] = field(default_factory=list)
    # vault writes it left waiting for their file to be quiet (a person still saving it):
    # when to try again (Unix ms; replica/engine/ledger.py); None: none waits
    retry_at: int | None = None
    # what it did, for people (replica/watch/activity.py): pulls, pushes, conflicts, refusals
    lines: list[Line] = field(default_factory=list)


def refused(e: BaseException) -> bool:
    """The hub says this caller may not have the space (any more): suspend, keep all."""
    return isinstance(e, Unauthorized | NotFound) or (
        isinstance(e, Forbidden) and not isinstance(e, PolicyDenied))


@dataclass
class Watcher:
    """The decision core of one space's watcher. ``handle`` takes inbox messages, ``tick``
    runs a sync when one is due, ``next_wake`` says when to call ``tick`` again."""

    # sync(local_only, journal): run one locked sync; ``journal`` (``journal()``, or None:
    # walk the whole vault) tells its scan where the vault changed since the last one
    sync: Callable[[bool, dict[str, Any] | None], SyncResult]
    write_status: Callable[[dict[str, Any]], object]
    settings: WatchSettings = field(default_factory=WatchSettings)
    clock: Callable[[], int] = now_ms
    rand: Callable[[], float] = random.random
    on_resume: Callable[[], None] = lambda: None  # tell the stream thread to reconnect now
    # apply(lines): apply changes that came with head events (None: not possible, sync)
    apply: Callable[[list[dict[str, Any]]], SyncResult | None] | None = None
    # own(paths): these vault files show what this replica wrote (no edit to publish)
    own: Callable[[list[str]], bool] | None = None
    vault: str = ""  # the vault's path: event paths under it name entries in the status
    # on_refused(code, message): record a refusal where `quire status` reads it after this
    # watcher stops (a refusal the stream reported had no sync to record it)
    on_refused: Callable[[str, str], None] | None = None
    # on_cookie(name, journal): acknowledge a reader inside this process (replica/ipc/journal.py)
    on_cookie: Callable[[str, dict[str, Any]], None] | None = None
    # tell(line): say what happened, for people (replica/watch/activity.py's Teller)
    tell: Callable[[Line], None] | None = None

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
        self.deleted = False  # the hub deleted the space (verified): the loop ends
        self.stream_up = False
        # why the stream was last refused (a head that does not verify, a parse limit) or
        # the changes an event carried did not verify; cleared when it is up again or when
        # an event's changes verify
        self.stream_error: dict[str, Any] | None = None
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
        # vault paths with edits seen but not yet synced (the debounce window), and the
        # entries the last sync left unpublished: the status file's "unpublished"
        self.waiting: set[str] = set()
        self.pending: list[str] = []
        # the journal (docs/watch.md): valid once the file events are armed (our own cookie
        # came back) and a vault scan started after that succeeded; a gap (the files thread
        # stopped) or a restart (a new generation) invalidates it
        self.generation = f"{os.getpid()}-{self.started_at}"
        self.armed_at: int | None = None
        self.scanned_at: int | None = None
        self.cookies: list[str] = []  # the last cookies seen, newest last
        self.rescan = False  # a local scan is due (the journal starts after one)
        self.problem_paths: list[str] = []  # where the last scan found problems
        self.walked_at: int | None = None  # start of the last sync that walked the vault
        # a vault write waits for its file to be quiet: a local-only sync (its flush writes
        # it) is due then
        self.vault_retry_at: int | None = None
        self.activity: list[dict[str, Any]] = []  # the last lines told, newest last
        self.told_error: str | None = None  # a failure told once, not at every retry
        # the held mass delete last told: every later sync holds it again, said once
        self.told_held: str | None = None
        self.vault_gone = False  # the files thread said the vault folder is gone

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
            self.waiting.update(paths or ())
            self.debounce.touch()
        elif kind == "armed":  # file events flow: scan once more so the journal starts
            self.armed_at = now
            self.rescan = True
        elif kind == "files_down":
            self.armed_at = None
        elif kind == "cookie":  # a reader asks: every event before its cookie is handled
            self.cookies = (self.cookies + [msg[1]])[-16:]
            if self.on_cookie is not None:
                self.on_cookie(msg[1], self.journal())
        elif kind == "stream":
            up = msg[1] == "up"
            self.stream_error = None if up else (msg[2] if len(msg) > 2 else None)
            if up and not self.stream_up and self.retry_at is not None and not self.suspended:
                self.retry_at = now  # the hub is back: do not sit out the backoff
            if not up and self.stream_up:
                self.next_poll_at = now  # we may have missed heads: poll at once
            self.stream_up = up
        elif kind == "vault":  # the files thread: the vault folder is gone, or back
            self._vault(msg[1], now)
        elif kind == "unavailable":  # the stream said the hub cannot reach its database:
            self.want_sync = True  # find out by syncing (503: backoff, retried on its own)
        elif kind == "refused":  # the stream said access is gone
            self._suspend(msg[1], msg[2] if len(msg) > 2 else "access refused")
        self._status()

    def _vault(self, what: str, now: int) -> None:
        """The vault folder went away (removed, moved, a disk unmounted) or came back: the
        files thread re-arms its watch on the folder that is there now (daemon.py). Syncs
        meanwhile refuse a vault that is gone (vault_missing); once it is back, the sync
        waiting in backoff runs at once and rescans the whole vault."""
        if what == "gone" and not self.vault_gone:
            self.vault_gone = True
            self._tell(Line("vault", f"the vault folder is gone ({self.vault}): nothing is "
                                     "published or written until it is back"))
        elif what == "back":
            self.vault_gone = False
            self._tell(Line("vault", f"the vault folder is back ({self.vault}): watching it "
                                     "again"))
            self.walked_at = None  # the next sync walks it all
            if self.retry_at is not None and not self.suspended:
                self.retry_at = now

    def _tell(self, line: Line) -> None:
        self.activity = (self.activity + [{"at": self.clock(), "kind": line.kind,
                                           "text": line.text}])[-RECENT:]
        if self.tell is not None:
            try:
                self.tell(line)
            except Exception:  # noqa: BLE001 - saying it must never stop the watcher
                log.exception("could not tell %s", line.kind)

    def _keep_changes(self, h: dict[str, Any]) -> None:
        """Remember the change lines a head event carried (by seq, one epoch)."""
        lines = h.get("changes")
        if h.get("epoch") != self.delivered_epoch:
            self.delivered = {}
            self.delivered_epoch = h.get("epoch")
        if not isinstance(lines, list):
            return
        # the event's head is signed (with its state root): the fast path verifies the
        # changes up to it exactly as a pull verifies a page up to its end line
        signed = {k: v for k, v in h.items() if k != "changes"}
        for line in lines:
            if isinstance(line, dict) and isinstance(line.get("seq"), int):
                self.delivered[line["seq"]] = (dict(line, end_head=signed)
                                               if line["seq"] == h.get("seq") else line)
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
        if self.want_sync or self.rescan:
            return self.clock()
        wakes = [self.next_poll_at]
        d = self.debounce.deadline()
        if d is not None:
            wakes.append(d)
        if self.vault_retry_at is not None:
            wakes.append(self.vault_retry_at)
        return min(wakes)

    def due(self) -> tuple[bool, bool]:
        """(a sync is due, it is only for local edits)."""
        now = self.clock()
        if self.suspended or self.retry_at is not None:
            return (self.retry_at is not None and now >= self.retry_at), False
        if self.want_sync or now >= self.next_poll_at:
            return True, False
        if self.rescan:  # the journal starts with a scan (local only: no hub request)
            return True, True
        if self.debounce.due():
            return True, True
        if self.vault_retry_at is not None and now >= self.vault_retry_at:
            return True, True  # a vault write waited for its file: the flush tries again
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
        by_edits = local_only and self.debounce.due()  # not the journal's first scan
        self.debounce.clear()  # edits from now on start a new window
        taken = set(self.waiting)  # a failed sync leaves them waiting
        scope = self._scope()
        self.rescan = False
        self.want_sync = False
        self.vault_retry_at = None  # this sync flushes; what still waits, it says again
        started = self.clock()
        self.scans += 1 if by_edits else 0
        log.debug("sync start (local_only=%s)", local_only)
        try:
            res = self.sync(local_only, scope)
        except LockHeld:
            self.retry_at = self.clock() + 250  # a manual 'quire sync' is running
            self.want_sync = True
            self._status()
            return
        except Exception as e:  # noqa: BLE001 - every failure is paced, none kills the loop
            self._failed(e)
            return
        self.syncs += 0 if res.skipped else 1
        self.waiting -= taken
        log.debug("sync done in %d ms (skipped=%s)", self.clock() - started, res.skipped)
        self._succeeded(res, started, settled=not local_only, walked=scope is None)

    def _scope(self) -> dict[str, Any] | None:
        """The journal a sync may scan by instead of walking the vault; None: walk. Even a
        valid journal is set aside once the last walk is ``idle_poll_ms`` old: a safety net
        for a file event lost unnoticed (watchfiles drops the kernel's notice that its
        event queue overflowed; docs/watch.md)."""
        j = self.journal()
        if not j["valid"] or self.walked_at is None or (
                self.clock() - self.walked_at >= self.settings.idle_poll_ms):
            return None
        return j

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
        except HubUnverified as e:  # the stream lied: say so, even if the pull is honest
            self.stream_error = {"code": e.code, "message": e.message,
                                 "details": dict(e.details)}
            log.warning("changes from the event not applied (HubUnverified: %s); syncing", e)
            return False
        except Exception as e:  # noqa: BLE001 - gap, failed check, I/O: the full sync decides
            log.info("changes from the event not applied (%s: %s); syncing", type(e).__name__, e)
            return False
        if res is None:
            return False
        self.want_sync = False
        self.stream_error = None  # the stream's changes verify again
        self.applied += 1
        log.debug("applied %d delivered change(s) in %d ms", len(lines),
                  self.clock() - started)
        self._succeeded(res, started, scanned=False)
        return True

    def _succeeded(self, res: SyncResult, started: int, settled: bool = False,
                   scanned: bool = True, walked: bool = False) -> None:
        """``scanned``: it scanned the vault (the fast path does not; ``walked``: all of it,
        not by the journal), so the journal restarts from it.
        ``settled``: a full sync, which reached the head the hub signed over our nonce.
        A head event handled before it (events are handled between syncs) that is still
        ahead was no head of the hub's (an epoch event is not signed; a lying stream): it
        is forgotten, not synced for again and again. Events handled after it count."""
        now = self.clock()
        if self.suspended:
            log.info("access is back: resuming")
            self.on_resume()
        self.suspended = False
        self.retry_at = None
        self.backoff.reset()
        self.last_sync_at = started
        if scanned:
            self.scanned_at = started
            self.problem_paths = list(res.problem_paths)
            self.walked_at = started if walked else self.walked_at
        self.last_success = now
        self.last_error = None
        self.told_error = None
        self.vault_retry_at = res.retry_at
        held = next((ln.text for ln in res.lines if ln.kind == "deletes_held"), None)
        for line in res.lines:
            if line.kind != "deletes_held" or line.text != self.told_held:
                self._tell(line)
        if not res.skipped or held is not None:
            self.told_held = held
        if not res.skipped:
            self.head, self.outbox, self.conflicts = res.head, res.outbox, res.conflicts
            self.pending = list(res.pending)
            poll = self.settings.idle_poll_ms if self.stream_up else self.settings.poll_ms
            self.next_poll_at = now + poll
            if (self.hub_head is not None and not self._has(self.hub_head)
                    and settled and res.head is not None):
                log.warning("the hub's signed head is %s, not the %s an event claimed",
                            res.head.get("seq"), self.hub_head)
                self.hub_head = {"epoch": res.head.get("epoch"), "seq": res.head.get("seq")}
            if self.hub_head is not None and not self._has(self.hub_head):
                self.want_sync = True  # a head arrived while we synced
            else:
                self.behind_since = None
        else:
            self.outbox, self.conflicts = res.outbox, res.conflicts
            self.pending = list(res.pending)
        self.state = "conflicts" if self.conflicts else "idle"
        self._status()

    def _failed(self, e: BaseException) -> None:
        now = self.clock()
        code = e.code if isinstance(e, QuireError) else "local_error"
        message = e.message if isinstance(e, QuireError) else f"{type(e).__name__}: {e}"
        if refused(e):
            self._suspend(code, message)
            return
        if isinstance(e, VerifiedDeletion):
            self._deleted(e)
            return
        attempt = self.backoff.attempt
        delay = self.backoff.next()
        self.delays = (self.delays + [[attempt, delay]])[-HISTORY:]
        self.retry_at = now + delay
        self.state = "backoff"
        self.last_error = {"code": code, "message": message, "at": now,
                           "retryable": bool(getattr(e, "retryable", True)),
                           "details": dict(e.details) if isinstance(e, QuireError) else {}}
        log.warning("sync failed (%s: %s); retrying in %d ms", code, message, delay)
        if code != self.told_error and not (code == "vault_missing" and self.vault_gone):
            self.told_error = code  # told once; the retries are in the log and the status
            self._tell(Line("error", f"sync failed: {code}: {message} (retrying; nothing "
                                     "local is lost)"))
        self._status()

    def _deleted(self, e: VerifiedDeletion) -> None:
        """The hub deleted the space (its signed word): stop watching it, keep everything."""
        log.warning("%s: this space's watcher stops", e.message)
        if self.on_refused is not None:  # `quire status` says so after the watcher is gone
            self.on_refused(e.code, e.message)
        self._tell(Line("refusal", f"{e.message}: this space's watcher stops; everything "
                                   "local is kept"))
        self.deleted = True
        self.state = "deleted"
        self.last_error = {"code": e.code, "message": e.message, "at": self.clock(),
                           "retryable": False, "details": dict(e.details)}
        self._status()

    def _suspend(self, code: str, message: str) -> None:
        if self.deleted:
            return  # the verified deletion is the last word: this watcher is ending
        now = self.clock()
        if not self.suspended:
            log.warning("access refused (%s: %s): suspended, everything local is kept",
                        code, message)
            if self.on_refused is not None:
                self.on_refused(code, message)
            self._tell(Line("refusal", f"refused by the hub ({code}: {message}): suspended; "
                                       "everything local is kept and publishes once access "
                                       "returns"))
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
            "stream_error": self.stream_error,
            "last_sync": self.last_sync_at,
            "last_success": self.last_success,
            "last_error": self.last_error,
            "next_retry": self.retry_at,
            "vault_retry": self.vault_retry_at,
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
            "unpublished": self.unpublished(),
            "journal": self.journal(JOURNAL_PROBLEMS_MAX),
            "activity": list(self.activity),
        }

    def unpublished(self, limit: int = 50) -> dict[str, Any]:
        """Entries with local changes not yet published: edits waiting for their debounce
        (from file events) and what the last sync left in the store."""
        prefix = self.vault.rstrip("/") + "/"
        ids = set(self.pending) | {p[len(prefix):-3] for p in self.waiting
                                   if p.startswith(prefix) and p.endswith(".md")}
        entries = sorted(ids)
        return {"count": len(entries), "entries": entries[:limit],
                "more": len(entries) > limit, "waiting": len(self.waiting)}

    def journal(self, problems_max: int | None = None) -> dict[str, Any]:
        """The vault paths changed since the last scan (files and folders, as their events
        named them), where that scan found problems, and whether a reader may trust them
        instead of walking the vault (``valid``); ``cookies`` acknowledges readers. Over
        ``problems_max`` problems (the status file): ``problem_paths`` is None, and a reader
        in another process walks."""
        valid = (self.armed_at is not None and self.scanned_at is not None
                 and self.scanned_at >= self.armed_at)
        problems = list(self.problem_paths) if valid else None
        if problems is not None and problems_max is not None and len(problems) > problems_max:
            problems = None
        return {"generation": self.generation, "valid": valid,
                "paths": sorted(self.waiting) if valid else [], "problem_paths": problems,
                "cookies": list(self.cookies)}

    def _status(self) -> None:
        try:
            self.write_status(self.status())
        except OSError:
            log.exception("could not write the status file")

    # ------------------------------------------------------------ the loop

    def run(self, inbox: queue.Queue[tuple[Any, ...]], stop: threading.Event) -> None:
        """Process the inbox and sync when due, until ``stop`` (real clock only)."""
        self._status()
        while not stop.is_set() and not self.deleted:
            self.tick()
            if self.deleted:
                break  # a refusal still in the inbox must not turn it into 'suspended'
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
        if not self.deleted:
            self.state = "stopped"
        self._status()
