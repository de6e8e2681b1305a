"""PostgreSQL: a pooled connection that died while idle is replaced before use, and one in
use moments ago is not pinged (hub/store/db.py ``PING_IDLE_S``: the ping on every checkout
was two of a publication's round trips)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from hub.store import db
from hub.store.db import Store
from tests.kit.pg import PG_ADMIN_URL, pg_database, require_pg


@pytest.fixture
def pg_store() -> Any:
    require_pg()
    with pg_database() as url:
        store = Store(url, pool_size=1)
        try:
            yield store
        finally:
            store.dispose()


def _backend(store: Store) -> int:
    with store.read() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_killed_while_idle_is_replaced_before_use(
        pg_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    first = _backend(pg_store)
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    # the connection now counts as idle (instead of waiting PING_IDLE_S)
    monkeypatch.setattr(db, "PING_IDLE_S", -1.0)
    second = _backend(pg_store)  # no error: the dead connection failed its ping
    assert second != first
    with pg_store.read() as conn:
        assert conn.execute(text("SELECT 1")).scalar_one() == 1


@pytest.mark.parametrize("idle", [False, True])
def test_only_a_connection_idle_longer_than_the_limit_is_pinged(
        pg_store: Store, monkeypatch: pytest.MonkeyPatch, idle: bool) -> None:
    import psycopg

    _backend(pg_store)  # the pool's one connection, checked in just now
    monkeypatch.setattr(db, "PING_IDLE_S", -1.0 if idle else 3600.0)
    cursors: list[int] = []
    real = psycopg.Connection.cursor

    def counting(self: Any, *a: Any, **kw: Any) -> Any:
        cursors.append(1)
        return real(self, *a, **kw)

    monkeypatch.setattr(psycopg.Connection, "cursor", counting)
    with pg_store.engine.connect():  # the checkout alone: only a ping opens a cursor
        pass
    assert len(cursors) == (1 if idle else 0)
