"""Engine, connection settings and the one transaction helper.

SQLite: WAL, ``synchronous=FULL``, writers start with ``BEGIN IMMEDIATE`` so two writers
never deadlock upgrading a read lock; readers start with a deferred ``BEGIN`` and see one
consistent snapshot. PostgreSQL: psycopg 3; writers lock the space row
(``SELECT … FOR UPDATE``); readers that must see one snapshot run REPEATABLE READ. Reads
that need no snapshot (``read(statements=True)``: the guard's preparation) run outside a
transaction on both. Pooled PostgreSQL connections idle over ``PING_IDLE_S`` are pinged.
"""

from __future__ import annotations

import logging
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

log = logging.getLogger("quire.hub.store")
T = TypeVar("T")
PING_IDLE_S = 1.0  # PostgreSQL: ping a pooled connection idle longer than this before use


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and pick psycopg 3 for it."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    url = normalize_url(url)
    if is_sqlite(url):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               pool_size=pool_size, max_overflow=pool_size)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _rec):  # type: ignore[no-untyped-def]
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn):  # type: ignore[no-untyped-def]
            mode = conn.get_execution_options().get("quire_txn", "read")
            if mode != "statements":  # Store.read(statements=True): no transaction
                conn.exec_driver_sql("BEGIN IMMEDIATE" if mode == "write" else "BEGIN")

        return engine
    engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size)

    # A pooled connection is pinged before use only when it sat idle for PING_IDLE_S: one
    # in use moments ago is alive, and the round trip of a ping on every checkout was two
    # of a publication's. A connection that fails its ping is replaced (SQLAlchemy retries
    # the checkout with a fresh one, as ``pool_pre_ping`` does); one that dies while busy
    # fails that statement, and SQLAlchemy then discards the pool's older connections.
    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn, rec, _proxy):  # type: ignore[no-untyped-def]
        if time.monotonic() - rec.info.get("quire_used", 0.0) <= PING_IDLE_S:
            return
        try:
            cur = dbapi_conn.cursor()
            try:
                cur.execute("SELECT 1")
            finally:
                cur.close()
            if not dbapi_conn.autocommit:
                dbapi_conn.rollback()  # the ping's implicit transaction
        except Exception as e:  # noqa: BLE001 - any failure: this connection is gone
            raise DisconnectionError(f"pooled connection failed its ping: {e}") from e

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn, rec):  # type: ignore[no-untyped-def]
        rec.info["quire_used"] = time.monotonic()

    return engine


def _retryable(exc: BaseException) -> bool:
    """Busy SQLite, PostgreSQL serialization failures and deadlocks: safe to run again."""
    if isinstance(exc, OperationalError) and "database is locked" in str(exc):
        return True
    if isinstance(exc, DBAPIError):
        code = getattr(getattr(exc, "orig", None), "sqlstate", None)
        return code in ("40001", "40P01")
    return False


# What a database that is down, unreachable, shutting down, full or overloaded raises: the
# request may succeed later, so the hub answers 503 ``unavailable`` (hub/app.py), not 500.
# A bug in a statement (ProgrammingError, IntegrityError, DataError) is none of these.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (DBAPIError, DisconnectionError, PoolTimeout)


def outage(exc: BaseException) -> str | None:
    """Why ``exc`` means the database is unavailable now (a short reason for the log and
    the answer: never the driver's whole message, which may name hosts), else None."""
    if isinstance(exc, (DisconnectionError, PoolTimeout)):
        return type(exc).__name__
    if isinstance(exc, (OperationalError, InterfaceError)):
        orig = getattr(exc, "orig", None)
        code = getattr(orig, "sqlstate", None)
        if isinstance(orig, sqlite3.Error) and not _SQLITE_OUTAGE.search(str(orig)):
            return None  # SQLite says OperationalError for "no such table" too: a bug
        if code and not code.startswith(_PG_OUTAGE_CLASSES):
            return None  # a PostgreSQL error of the statement, not of the server
        return f"{type(orig or exc).__name__}" + (f" ({code})" if code else "")
    return None


# SQLite's OperationalError messages that mean "not now" (busy, the file or disk), not a
# statement that can never run
_SQLITE_OUTAGE = re.compile(r"locked|busy|unable to open|disk i/o|disk is full|"
                            r"readonly database|interrupted", re.I)
# SQLSTATE classes of an unavailable server: connection exception, insufficient resources,
# operator intervention (shutdown, cancel), system error; and lock_not_available
_PG_OUTAGE_CLASSES = ("08", "53", "57", "58", "55P03")


class Store:
    """Owns the engine. Every read and write goes through ``read`` / ``run_write``."""

    def __init__(self, url: str, *, pool_size: int = 10):
        self.url = normalize_url(url)
        self.sqlite = is_sqlite(self.url)
        self.engine = make_engine(self.url, pool_size=pool_size)
        # publications: one transaction and one commit for those that arrive together
        self.commit_group = GroupCommit(self)
        self._waiting = 0  # threads waiting for a pooled connection (hub metrics)
        self._waiting_lock = threading.Lock()

    def dispose(self) -> None:
        self.engine.dispose()

    def _connect(self) -> Connection:
        with self._waiting_lock:
            self._waiting += 1
        try:
            return self.engine.connect()
        finally:
            with self._waiting_lock:
                self._waiting -= 1

    def pool_stats(self) -> dict[str, int]:
        """Connections in use, idle in the pool, and callers waiting for one."""
        pool = self.engine.pool
        in_use = getattr(pool, "checkedout", lambda: 0)()
        idle = getattr(pool, "checkedin", lambda: 0)()
        return {"in_use": int(in_use), "idle": int(idle), "waiting": self._waiting}

    @contextmanager
    def read(self, *, snapshot: bool = False, statements: bool = False
             ) -> Iterator[Connection]:
        """A read transaction. ``snapshot=True`` guarantees one consistent view for its whole
        life (used to stream a snapshot at one head).

        ``statements=True``: no transaction at all (PostgreSQL: autocommit; SQLite: no
        BEGIN): each statement sees what was committed when it started, which is all a
        READ COMMITTED transaction guarantees on PostgreSQL too, without its BEGIN and
        COMMIT (round trips there, statements here). For reads that need no single
        snapshot; a write would commit on its own."""
        opts: dict[str, object] = {"quire_txn": "read"}
        if snapshot and not self.sqlite:
            opts["isolation_level"] = "REPEATABLE READ"
        elif statements:
            opts["quire_txn"] = "statements"
            if not self.sqlite:
                opts["isolation_level"] = "AUTOCOMMIT"
        with self._connect().execution_options(**opts) as conn:
            with conn.begin():
                yield conn

    def run_write(self, fn: Callable[[Connection], T], *, attempts: int = 8) -> T:
        """Run ``fn(conn)`` in one write transaction and commit.

        ``fn`` may run more than once: on a busy database or a serialization failure the
        whole transaction is rolled back and retried, so ``fn`` must not have effects
        outside the transaction.
        """
        delay = 0.005
        for attempt in range(attempts):
            try:
                with self._connect().execution_options(quire_txn="write") as conn:
                    with conn.begin():
                        return fn(conn)
            except (OperationalError, DBAPIError) as exc:
                if attempt + 1 >= attempts or not _retryable(exc):
                    raise
                log.info("txn_retry", extra={"quire": {"error": type(exc).__name__,
                                                       "attempt": attempt + 1}})
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")


class _Item:
    __slots__ = ("fn", "wake", "lead", "finished", "result", "error")

    def __init__(self, fn: Callable[[Connection], object]):
        self.fn = fn
        self.wake = threading.Event()
        self.lead = False
        self.finished = False
        self.result: object = None
        self.error: BaseException | None = None


class _Lane:
    """The queue of one key's group commit, and whether somebody leads it."""

    __slots__ = ("queue", "leading")

    def __init__(self) -> None:
        self.queue: list[_Item] = []
        self.leading = False


class GroupCommit:
    """Group commit: concurrent writers of one process share one transaction and one
    commit (one fsync on SQLite, one WAL flush on PostgreSQL).

    ``run(fn, key)`` queues ``fn`` in the lane of ``key`` (the space it publishes to); the
    first caller to find nobody committing in that lane becomes its leader: it takes up to
    ``max_group`` queued functions, runs them in order in one write transaction, each
    inside its own SAVEPOINT (a function that raises is rolled back to its savepoint and
    gets its exception, so one refused batch never sinks another; later ones see exactly
    the writes of the earlier ones that succeeded), commits, hands every caller its own
    result, and passes the lead to the oldest caller still waiting. Database errors (busy,
    serialization failure, deadlock) abort the whole group, which ``run_write`` retries as
    a whole: every function must be a pure function of the database, as for
    ``run_write``. Callers block in their own thread; nobody polls.

    Lanes (PostgreSQL): publications to different spaces never wait for one another's
    group; each lane's transaction locks one space row, so two processes' groups never
    lock two spaces in opposite orders (a deadlock, the whole group again). SQLite has one
    lane: its writers take the one file lock anyway, and one group is one fsync.
    """

    def __init__(self, store: Store, max_group: int = 64):
        self.store = store
        self.max_group = max_group
        self._lock = threading.Lock()
        self._lanes: dict[object, _Lane] = {}

    @property
    def _queue(self) -> list[_Item]:
        """Every lane's waiting functions (tests)."""
        return [it for lane in self._lanes.values() for it in lane.queue]

    @property
    def _leading(self) -> bool:
        return any(lane.leading for lane in self._lanes.values())

    def run(self, fn: Callable[[Connection], T], key: object = None) -> T:
        item = _Item(fn)
        lane_key = None if self.store.sqlite else key
        with self._lock:
            lane = self._lanes.get(lane_key)
            if lane is None:
                lane = self._lanes[lane_key] = _Lane()
            lane.queue.append(item)
            if not lane.leading:
                lane.leading = item.lead = True
        if not item.lead:
            item.wake.wait()
        if not item.finished:  # asked to lead: our item heads the queue
            self._commit_next_group(lane_key, lane)
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[return-value]

    def _commit_next_group(self, key: object, lane: _Lane) -> None:
        with self._lock:
            group = lane.queue[:self.max_group]
            del lane.queue[:self.max_group]
        try:
            if len(group) == 1:
                group[0].result = self.store.run_write(group[0].fn)
            else:
                for it, (result, error) in zip(group, self.store.run_write(
                        lambda conn: self._group_txn(conn, group)), strict=True):
                    it.result, it.error = result, error
        except BaseException as e:  # noqa: BLE001 - handed to the caller(s), not swallowed
            for it in group:
                it.error = e
        finally:
            with self._lock:
                for it in group:
                    it.finished = True
                    it.wake.set()
                if lane.queue:
                    nxt = lane.queue[0]
                    nxt.lead = True
                    nxt.wake.set()
                else:
                    lane.leading = False
                    del self._lanes[key]  # an idle space keeps no lane

    @staticmethod
    def _group_txn(conn: Connection, group: list[_Item]
                   ) -> list[tuple[object, BaseException | None]]:
        # plain SAVEPOINT statements on the transaction's DBAPI connection (SQLite and
        # PostgreSQL alike): SQLAlchemy's nested-transaction objects cost more than the work
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        out: list[tuple[object, BaseException | None]] = []
        try:
            for it in group:
                cur.execute("SAVEPOINT quire_group_item")
                try:
                    result = it.fn(conn)
                except IntegrityError as e:  # a constraint refused this function's writes
                    cur.execute("ROLLBACK TO SAVEPOINT quire_group_item")
                    out.append((None, e))
                except SQLAlchemyError as e:
                    if _retryable(e):
                        raise  # busy, serialization, deadlock: the whole group again
                    # a statement of this function failed for good (a bad value, a missing
                    # table): its error, its rollback; the others still commit
                    cur.execute("ROLLBACK TO SAVEPOINT quire_group_item")
                    out.append((None, e))
                except Exception as e:  # noqa: BLE001 - this function's refusal, its answer
                    cur.execute("ROLLBACK TO SAVEPOINT quire_group_item")
                    out.append((None, e))
                else:
                    out.append((result, None))
                # no RELEASE (one round trip per item saved): the next SAVEPOINT of the same
                # name nests in this one and ROLLBACK TO names the newest, so a refusal
                # still undoes exactly its own function's writes; COMMIT keeps the rest
        finally:
            cur.close()
        return out
