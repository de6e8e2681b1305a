"""The event broker: tells open event streams (and long-polls) that a space changed.

    publication commits ──► Hub.published() ──► Broker.local()  ──► subscriptions (this process)
          │                                                   ▲
          └─ pg_notify('quire_events', …) in the same txn     │ (deduplicated by head)
                      │                                       │
                      ▼                                       │
           every hub process: listener thread (LISTEN) ───────┘

Kinds of event: ``head`` (``{space, epoch, seq, digest, at}``), ``epoch`` (``{space, epoch,
previous}``) and ``access`` (``{space?}``: somebody's access may have changed; streams
re-check their caller now instead of at the next periodic check).

PostgreSQL: the head notification is sent by ``SELECT pg_notify(…)`` inside the transaction
that advances the head, so it is delivered exactly when (and only if) that transaction
commits, to every process that LISTENs on the channel, this one included. The in-process
path delivers first (no round trip); the echo is dropped because the broker remembers the
newest head it has seen per space. A process whose LISTEN connection drops reconnects and
then *pokes* every subscription, which re-reads the head from the database: notifications
sent while it was deaf are not replayed by PostgreSQL, so this is what keeps a stream from
missing a head.

SQLite: one hub process serves one SQLite file (the file lock makes a second writer
process slow and the design does not support it), so the in-process fan-out is all there
is; nothing listens.

Head events may carry the change(s) they announce (``hub/api/events.py``): the lines are
read from this process's database once per head, whichever process committed it, and
shared by every stream that sends them (``ChangeCache``); NOTIFY payloads stay small (the
8000-byte limit of PostgreSQL never matters).

Subscriptions are filed by the space they follow: an event of one space is pushed to that
space's subscriptions (and those following every space) and never looks at the others, so
a publication's fan-out costs the same with 10 or 10,000 watchers of other spaces
(``visits`` counts the subscriptions delivery looked at; ``quire_event_fanout_visits``).
Pokes, shutdowns and access changes that name no space go to every subscription.

Subscriptions are mailboxes that coalesce: a slow stream never makes a publication wait
and never grows memory, it only skips intermediate heads (the newest head is what a
watcher needs; it pulls every batch after its own head anyway).

This module imports neither Starlette nor SQLAlchemy; the store hands it a DSN.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hub import logs

log = logging.getLogger("quire.hub.events")

CHANNEL = "quire_events"
MAILBOX = 32  # pending events per subscription before they collapse into one poke


CACHED_CHANGES = 256  # change lines kept per process (a few heads of every busy space)


class ChangeCache:
    """Change lines (the JSON text of a ``changes`` line) by ``(space, epoch, seq)``, read
    once per process however many streams send them. Event loop thread only.

    ``get`` returns the lines after ``after`` up to ``upto`` in order, or None when any of
    them could not be read (the stream then sends a bare head). Concurrent callers wait for
    the one read in flight instead of starting their own."""

    def __init__(self, size: int = CACHED_CHANGES):
        self.size = size
        self._lines: OrderedDict[tuple[str, str, int], asyncio.Future[str | None]] = (
            OrderedDict())
        self.loads = 0  # database reads made (tests check the sharing)

    def forget(self, space: str) -> None:
        """Drop every cached line of ``space`` (a purge rewrote its history)."""
        for k in [k for k in self._lines if k[0] == space]:
            del self._lines[k]

    async def get(self, space: str, epoch: str, after: int, upto: int,
                  load: Callable[[int, int], Awaitable[dict[int, str]]]) -> list[str] | None:
        keys = [(space, epoch, seq) for seq in range(after + 1, upto + 1)]
        mine: dict[int, asyncio.Future[str | None]] = {}
        loop = asyncio.get_running_loop()
        for k in keys:
            if k not in self._lines:
                mine[k[2]] = self._lines[k] = loop.create_future()
        futs = [self._lines[k] for k in keys]
        if mine:
            lo, hi = min(mine) - 1, max(mine)
            self.loads += 1
            got: dict[int, str] = {}
            try:
                got = await load(lo, hi)
            except Exception as e:  # noqa: BLE001 - a bare head is always a correct answer
                logs.event(log, "event_lines_unread", logging.DEBUG, space=space,
                           first=lo + 1, last=hi, error=repr(e))
            finally:  # also when this stream is cancelled: nobody waits forever
                for seq, fut in mine.items():
                    line = got.get(seq)
                    if line is None and self._lines.get((space, epoch, seq)) is fut:
                        del self._lines[(space, epoch, seq)]  # not cached: read next time
                    if not fut.done():
                        fut.set_result(line)
                while len(self._lines) > self.size:
                    self._lines.popitem(last=False)
        out = []
        for fut in futs:
            line = await asyncio.shield(fut)
            if line is None:
                return None
            out.append(line)
        return out


@dataclass
class Event:
    kind: str  # head | epoch | access | poke | shutdown
    data: dict[str, Any] = field(default_factory=dict)


class Subscription:
    """One stream's mailbox. ``space`` None: every space. A stream subscribes before it
    knows its space's id (nothing slips in while it reads the head), then names it:
    setting ``space`` files the mailbox under that space in the broker."""

    def __init__(self, broker: Broker, space: str | None):
        self.broker = broker
        self._space = space
        self._pending: list[Event] = []
        self._wake = asyncio.Event()

    @property
    def space(self) -> str | None:
        return self._space

    @space.setter
    def space(self, value: str | None) -> None:  # event loop thread only
        self.broker._refile(self, value)

    def push(self, ev: Event) -> None:  # event loop thread only
        if len(self._pending) >= MAILBOX:
            self._pending = [Event("poke")]
        else:
            self._pending.append(ev)
        self._wake.set()

    async def next(self, timeout: float | None) -> list[Event]:
        """Events since the last call; ``[]`` when ``timeout`` passes first."""
        if not self._pending:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                return []
        out, self._pending = self._pending, []
        self._wake.clear()
        return out

    def close(self) -> None:
        self.broker.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Broker:
    """Fan-out of hub events to this process's subscriptions, and across processes on
    PostgreSQL through ``LISTEN``. Thread-safe entry points: ``local`` and the listener."""

    def __init__(self, *, pg_dsn: str | None = None,
                 on_notify_lag: Callable[[float], None] | None = None,
                 clock: Callable[[], int] | None = None):
        self.pg_dsn = pg_dsn
        self.on_notify_lag = on_notify_lag
        self.clock = clock or (lambda: int(time.time() * 1000))
        # subscriptions by the space they follow (None: every space). A space's head goes
        # to its own subscriptions and the None ones, never past those of other spaces:
        # the cost of an event does not grow with the watchers of other spaces
        self._by_space: dict[str | None, set[Subscription]] = {}
        self.visits = 0  # subscriptions looked at by delivery (tests and metrics read it)
        self._seen: dict[str, tuple[str, int]] = {}  # space -> newest (epoch, seq) delivered
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()  # set while a LISTEN connection is up
        self.changes = ChangeCache()  # change lines for head events, shared by streams
        self.closing = False  # set by shutdown()

    # ------------------------------------------------------------ lifecycle

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self.pg_dsn and self._thread is None:
            self._thread = threading.Thread(target=self._listen_forever, name="quire-listen",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=3)
            self._thread = None

    @property
    def open_streams(self) -> int:
        return sum(len(subs) for subs in self._by_space.values())

    def subscribe(self, space: str | None) -> Subscription:
        sub = Subscription(self, space)
        self._by_space.setdefault(space, set()).add(sub)
        if self.closing:
            sub.push(Event("shutdown"))
        return sub

    def shutdown(self) -> None:
        """The process is stopping: every subscription (and every later one) gets a
        ``shutdown`` event; streams end and long-polls answer. Safe from a signal handler."""
        self.closing = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._deliver, Event("shutdown"))

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._by_space.get(sub.space)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_space[sub.space]

    def _refile(self, sub: Subscription, space: str | None) -> None:
        """``sub`` follows ``space`` from now on (``Subscription.space = …``)."""
        self.unsubscribe(sub)
        sub._space = space
        self._by_space.setdefault(space, set()).add(sub)

    # ------------------------------------------------------------ delivery

    def local(self, kind: str, data: dict[str, Any]) -> None:
        """A change committed in this process (``Hub.listeners`` calls this)."""
        self._deliver_threadsafe(Event(kind, dict(data)))

    def _deliver_threadsafe(self, ev: Event) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._deliver(ev)
        else:
            loop.call_soon_threadsafe(self._deliver, ev)

    def _fresh(self, ev: Event) -> bool:
        """Drop heads already delivered (the NOTIFY echo of a local publication)."""
        space = ev.data.get("space")
        if ev.kind == "head" and isinstance(space, str):
            key = (str(ev.data.get("epoch")), int(ev.data.get("seq", -1)))
            prev = self._seen.get(space)
            if prev is not None and prev[0] == key[0] and prev[1] >= key[1]:
                return False
            self._seen[space] = key
        elif ev.kind == "epoch" and isinstance(space, str):
            prev = self._seen.get(space)
            if prev is not None and prev[0] == ev.data.get("epoch"):
                return False
            self._seen[space] = (str(ev.data.get("epoch")), 0)
        return True

    def _deliver(self, ev: Event) -> None:  # event loop thread
        if not self._fresh(ev):
            return
        space = ev.data.get("space")
        # a poke, a shutdown and an access change naming no space (a device revoked, a
        # user deactivated) concern every stream; anything naming a space, that space's
        if ev.kind in ("poke", "shutdown") or not isinstance(space, str):
            targets = [sub for subs in self._by_space.values() for sub in subs]
        else:
            targets = [*self._by_space.get(space, ()), *self._by_space.get(None, ())]
        self.visits += len(targets)
        for sub in targets:
            sub.push(ev)

    # ------------------------------------------------------------ PostgreSQL

    @staticmethod
    def payload(kind: str, data: dict[str, Any]) -> str:
        return json.dumps({"k": kind, **data}, separators=(",", ":"), sort_keys=True)

    def notify(self, kind: str, data: dict[str, Any]) -> None:
        """Send one notification outside any transaction (epoch and access events, which
        are announced after their transaction committed). No-op without PostgreSQL."""
        if not self.pg_dsn:
            return
        import psycopg

        try:
            with psycopg.connect(self.pg_dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self.payload(kind, data)))
        except Exception:  # streams still re-check access periodically
            logs.failure(log, "notify_failed", kind=kind)

    def _on_notification(self, payload: str) -> None:
        try:
            msg = json.loads(payload)
            kind = msg.pop("k")
        except (ValueError, KeyError, TypeError, AttributeError):
            logs.event(log, "notification_malformed", logging.WARNING, payload=payload[:200])
            return
        at = msg.get("at")
        if kind == "head" and isinstance(at, int) and self.on_notify_lag is not None:
            self.on_notify_lag(max(0, self.clock() - at) / 1000.0)
        self._deliver_threadsafe(Event(kind, msg))

    def _listen_forever(self) -> None:
        import psycopg

        assert self.pg_dsn is not None
        delay = 0.2
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.pg_dsn, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    delay = 0.2
                    # we may have been deaf: every stream re-reads its head
                    self._deliver_threadsafe(Event("poke"))
                    while not self._stop.is_set():
                        for n in conn.notifies(timeout=0.25):
                            self._on_notification(n.payload)
            except Exception as e:
                was_listening = self.listening.is_set()
                self.listening.clear()
                if self._stop.is_set():
                    break
                if was_listening:  # the database may be gone: every stream re-checks now
                    self._deliver_threadsafe(Event("poke"))
                logs.event(log, "listen_lost", logging.WARNING, error=type(e).__name__,
                           retry_s=round(delay, 1))
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
        self.listening.clear()
