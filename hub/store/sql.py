"""Plain SQL for the hot path, and the helpers every store module runs its statements with.

The publication path runs ~15 statements per batch. Built with SQLAlchemy Core each costs
more in expression building, cache-key generation and result processing than in the
database, so those statements are written once as SQL with ``:name`` parameters, rendered
for the driver's paramstyle once, and run on the transaction's DBAPI cursor (the same
connection and transaction SQLAlchemy opened). Rows come back as plain tuples.

    Sql(text).one / .all / .run    one statement on the transaction's cursor
    read_together(conn, reads)     independent reads in one round trip (PostgreSQL pipeline)
    pipelined(conn)                a block of writes that do not wait for their answers
    notify_txn(conn, …)            pg_notify, delivered when the transaction commits
    driver_error(…)                a driver error as SQLAlchemy raises it (for the retries)

Functions ending in ``_txn`` must run inside a transaction opened by ``Store.read`` or
``Store.run_write`` and take its connection as first argument."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError


class Sql:
    __slots__ = ("sqlite", "pg")

    def __init__(self, sql: str):
        self.sqlite = sql  # sqlite3: named parameters as written
        self.pg = re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)  # psycopg: pyformat

    def cursor(self, conn: Connection, params: dict[str, Any]) -> Any:
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        sql = self.pg if conn.dialect.name == "postgresql" else self.sqlite
        try:
            cur.execute(sql, params)
        except conn.dialect.loaded_dbapi.Error as e:
            cur.close()
            raise driver_error(conn, sql, params, e) from e
        return cur

    def one(self, conn: Connection, params: dict[str, Any]) -> Any:
        cur = self.cursor(conn, params)
        try:
            return cur.fetchone()
        finally:
            cur.close()

    def all(self, conn: Connection, params: dict[str, Any]) -> list[Any]:
        cur = self.cursor(conn, params)
        try:
            return cur.fetchall()
        finally:
            cur.close()

    def run(self, conn: Connection, params: dict[str, Any]) -> int:
        cur = self.cursor(conn, params)
        try:
            return int(cur.rowcount)
        finally:
            cur.close()


def driver_error(conn: Connection, sql: str, params: Any, e: Exception) -> Exception:
    """A driver error as SQLAlchemy would raise it (``Store.run_write`` retries busy SQLite,
    serialization failures and deadlocks by those classes)."""
    return DBAPIError.instance(sql, params, e, conn.dialect.loaded_dbapi.Error,
                               dialect=conn.dialect)


Read = tuple[Sql, dict[str, Any]]  # a statement and its parameters, for ``read_together``


def in_statement(cache: dict[int, Sql], n: int, text: Callable[[str], str], name: str) -> Sql:
    """The statement ``text(":name0, :name1, …")`` for an ``IN`` of ``n`` values, made once
    per ``n`` and kept in ``cache``."""
    stmt = cache.get(n)
    if stmt is None:
        stmt = cache[n] = Sql(text(", ".join(f":{name}{i}" for i in range(n))))
    return stmt


def read_together(conn: Connection, reads: list[Read]) -> list[list[Any]]:
    """Run independent reads and return their rows, in order. PostgreSQL: all of them in
    one round trip (pipeline mode, ``pipelined``); SQLite: one after another."""
    curs: list[Any] = []
    try:
        with pipelined(conn):  # leaving the block is the one round trip (a Sync)
            for stmt, params in reads:
                curs.append(stmt.cursor(conn, params))
        # fetched after the block: a fetch inside would sync, then leaving syncs again
        return [cur.fetchall() for cur in curs]
    finally:
        for cur in curs:
            cur.close()


_NOTIFY = Sql("SELECT pg_notify(:channel, :payload)")


def notify_txn(conn: Connection, channel: str, payload: str) -> None:
    """PostgreSQL: queue a notification, delivered to every LISTENing process exactly when
    this transaction commits (and never if it rolls back). SQLite: nothing to do."""
    if conn.dialect.name == "postgresql":
        _NOTIFY.run(conn, {"channel": channel, "payload": payload})  # no answer awaited


@contextmanager
def pipelined(conn: Connection) -> Iterator[None]:
    """PostgreSQL: the block's statements on this connection go out in psycopg's pipeline
    mode: a statement whose answer is not read (a write through ``Sql.run``, whose rowcount
    is then unknown: -1) does not wait for it, so N writes cost one round trip; a read (``Sql.one``/``all``) still gets its
    answer, after everything queued before it. A statement that fails surfaces as the usual
    SQLAlchemy error (``Store.run_write`` retries serialization failures and deadlocks, the
    group commit rolls back to the item's savepoint), at the latest when the block ends;
    a refusal raised by Python inside the block wins over a failure of a queued write (the
    transaction is rolled back either way). SQLite: nothing to do (no round trips)."""
    if conn.dialect.name != "postgresql":
        yield
        return
    raw = conn.connection.dbapi_connection
    try:
        with raw.pipeline():  # type: ignore[union-attr]
            yield
    except conn.dialect.loaded_dbapi.Error as e:
        raise driver_error(conn, "(pipelined statements)", None, e) from e
