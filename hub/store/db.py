"""Engine, connection settings and the one transaction helper.

SQLite: WAL, ``synchronous=FULL``, writers start with ``BEGIN IMMEDIATE`` so two writers
never deadlock upgrading a read lock; readers start with a deferred ``BEGIN`` and see one
consistent snapshot. PostgreSQL: psycopg 3; writers lock the space row
(``SELECT … FOR UPDATE``); readers that must see one snapshot run REPEATABLE READ.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

log = logging.getLogger("quire.hub.store")
T = TypeVar("T")


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
            conn.exec_driver_sql("BEGIN IMMEDIATE" if mode == "write" else "BEGIN")

        return engine
    return create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)


def _retryable(exc: BaseException) -> bool:
    """Busy SQLite, PostgreSQL serialization failures and deadlocks: safe to run again."""
    if isinstance(exc, OperationalError) and "database is locked" in str(exc):
        return True
    if isinstance(exc, DBAPIError):
        code = getattr(getattr(exc, "orig", None), "sqlstate", None)
        return code in ("40001", "40P01")
    return False


class Store:
    """Owns the engine. Every read and write goes through ``read`` / ``run_write``."""

    def __init__(self, url: str, *, pool_size: int = 10):
        self.url = normalize_url(url)
        self.sqlite = is_sqlite(self.url)
        self.engine = make_engine(self.url, pool_size=pool_size)

    def dispose(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """A read transaction. ``snapshot=True`` guarantees one consistent view for its whole
        life (used to stream a snapshot at one head)."""
        opts: dict[str, object] = {"quire_txn": "read"}
        if snapshot and not self.sqlite:
            opts["isolation_level"] = "REPEATABLE READ"
        with self.engine.connect().execution_options(**opts) as conn:
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
                with self.engine.connect().execution_options(quire_txn="write") as conn:
                    with conn.begin():
                        return fn(conn)
            except (OperationalError, DBAPIError) as exc:
                if attempt + 1 >= attempts or not _retryable(exc):
                    raise
                log.info("retrying transaction after %s", type(exc).__name__)
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")
