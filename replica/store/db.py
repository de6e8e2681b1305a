"""The replica's SQLite files, opened with the standard library's ``sqlite3``
(docs/decisions.md, "Start-up cost").

The replica used SQLAlchemy Core for its stores; importing it cost every ``quire`` process
about a quarter of a second (and asyncio with it) before any work, for statements that are
plain SQL anyway. This module keeps the small shape the store code was written against:

    Database(path, pragmas)            one file; a new connection per use (as NullPool did)
      ├─ .connect()  -> Conn            reads; rolled back and closed at the end
      └─ .begin()    -> Conn            a transaction: committed at the end, rolled back on
                                         an exception
    Conn.execute(sql, params)           a cursor whose rows are named tuples (``r.id``,
                                         ``r[0]``, ``r._asdict()``); ``.first()``,
                                         ``.all()``, ``.scalar()``
    Conn.connection                     the ``sqlite3.Connection`` (the hot paths' cursors)
    .keep_open(n)  /  .close_idle()     a long-running process (the watcher) keeps up to n
                                         idle connections for the next uses, instead of
                                         opening and closing one each time

Transactions behave as they did under SQLAlchemy's pysqlite dialect, which left the driver
in its default mode: ``BEGIN`` (deferred) is issued by ``sqlite3`` before the first write
of a transaction, and reads before it see the latest commit. ``immediate=True`` opens the
connection in autocommit mode and starts every ``begin()`` with ``BEGIN IMMEDIATE``: the
write lock is taken before the first read, so read-check-write sequences are safe across
processes (the conflict desk's claims).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import namedtuple
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

OperationalError = sqlite3.OperationalError


@cache
def _row_type(fields: tuple[str, ...]) -> Any:
    return namedtuple("Row", fields, rename=True)


def _named(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Any:
    return _row_type(tuple(d[0] for d in cursor.description))(*row)


class Cursor(sqlite3.Cursor):
    """A cursor with the result helpers the store's callers read rows with."""

    def first(self) -> Any:
        return self.fetchone()

    def all(self) -> list[Any]:
        return self.fetchall()

    def scalar(self) -> Any:
        row = self.fetchone()
        return None if row is None else row[0]


class Conn:
    """One open connection, as the store's functions use it (they end in ``_txn``)."""

    __slots__ = ("connection", "cursors")

    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection
        # the cursors handed out: closed at the end of the use, so that none left half
        # read keeps a read snapshot open on a connection that is kept for the next use
        self.cursors: list[Cursor] = []

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Cursor:
        cur = self.connection.cursor(Cursor)
        cur.row_factory = _named
        self.cursors.append(cur)
        cur.execute(sql, tuple(params))
        return cur

    def close_cursors(self) -> None:
        for cur in self.cursors:
            cur.close()
        self.cursors.clear()

    exec_driver_sql = execute  # the name SQLAlchemy gave plain SQL; tests use it

    def scalar(self, sql: str, params: Iterable[Any] = ()) -> Any:
        """The first column of the first row, or None."""
        row = self.connection.execute(sql, tuple(params)).fetchone()
        return None if row is None else row[0]

    def column(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """The first column of every row."""
        return [r[0] for r in self.connection.execute(sql, tuple(params))]


def make_private_file(path: Path) -> None:
    """Create ``path`` 0600 (its folder 0700) if it does not exist yet: SQLite makes a new
    database with the umask's mode (0644 under the common 022), readable by every user of
    the machine, and makes its ``-wal`` and ``-shm`` files with the database's mode. An
    empty file is a new database to SQLite. An existing file keeps its mode (``quire
    doctor`` finds one that is not private)."""
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass  # another process made it first


class Database:
    """One SQLite file. Every ``connect()``/``begin()`` opens its own connection, runs the
    pragmas and closes it at the end: a process holds no connection between uses, unless
    it asked to keep some (``keep_open``).

    Why a watcher keeps them: each new connection costs its open and pragmas (~0.1-0.3 ms
    of CPU), and SQLite fsyncs the folder along with the first commit of every connection
    that opened the WAL (it opens it with O_CREAT and then syncs its directory entry):
    a second fsync per commit, 1-3 ms of wall time on a busy disk. A kept connection is
    idle between uses: its transaction ended (committed or rolled back), so it holds no
    snapshot and no lock, and another process sees nothing of it."""

    def __init__(self, path: Path, pragmas: Iterable[str], *, immediate: bool = False):
        self.path = path
        self.pragmas = tuple(pragmas)
        self.immediate = immediate
        self._keep = 0
        self._idle: list[sqlite3.Connection] = []
        self._idle_lock = threading.Lock()
        self._private = False  # the file made 0600 before SQLite first opens it

    def open(self) -> sqlite3.Connection:
        if not self._private:
            make_private_file(self.path)
            self._private = True
        # "DEFERRED" is the driver's default mode by its documented name (its "" alias)
        raw = sqlite3.connect(str(self.path), check_same_thread=False,
                              isolation_level=None if self.immediate else "DEFERRED")
        for p in self.pragmas:
            raw.execute(p)
        return raw

    def keep_open(self, n: int) -> None:
        """Keep up to ``n`` idle connections between uses (0: none, close them)."""
        self._keep = n
        if n == 0:
            self.close_idle()

    def close_idle(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for raw in idle:
            raw.close()

    def _take(self) -> sqlite3.Connection:
        if self._keep:
            with self._idle_lock:
                if self._idle:
                    return self._idle.pop()
        return self.open()

    def _give(self, raw: sqlite3.Connection) -> None:
        """Back to the idle list (no transaction open), or closed."""
        if self._keep and not raw.in_transaction:
            with self._idle_lock:
                if len(self._idle) < self._keep:
                    self._idle.append(raw)
                    return
        raw.close()

    @contextmanager
    def connect(self) -> Iterator[Conn]:
        raw = self._take()
        conn = Conn(raw)
        try:
            yield conn
        except BaseException:
            raw.close()  # not reused after anything unexpected
            raise
        try:
            conn.close_cursors()
            raw.rollback()
        except BaseException:
            raw.close()
            raise
        self._give(raw)

    @contextmanager
    def begin(self, *, durable: bool = True) -> Iterator[Conn]:
        """``durable=False``: this one commit is not fsynced (``synchronous=NORMAL``, WAL
        mode); a power cut may lose it, and only it with what follows it: for a record
        the next run can redo (see ``Store.tx``)."""
        raw = self._take()
        conn = Conn(raw)
        sync = None
        try:
            if not durable:
                sync = raw.execute("PRAGMA synchronous").fetchone()[0]
                raw.execute("PRAGMA synchronous=NORMAL")
            if self.immediate:
                raw.execute("BEGIN IMMEDIATE")
            yield conn
            conn.close_cursors()
            if self.immediate:
                if raw.in_transaction:
                    raw.execute("COMMIT")
            else:
                raw.commit()
            if sync is not None:
                raw.execute(f"PRAGMA synchronous={int(sync)}")
        except BaseException:
            try:
                if raw.in_transaction:
                    raw.rollback()
            finally:
                raw.close()
            raise
        self._give(raw)
