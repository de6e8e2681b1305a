"""SQL for the hub's own rows: ``hub_state`` (hub id, the hub record of URL, key and
schema, the hub audit chain's tip), the hub key rotation statements and the Alembic
revision. ``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from hub.store.schema import hub_keys, hub_state


def hub_state_txn(conn: Connection, *, lock: bool = False) -> Any:
    q = select(hub_state).where(hub_state.c.id == 1)
    if lock:
        q = q.with_for_update()
    return conn.execute(q).first()


def insert_hub_state_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(hub_state).values(id=1, **values))


def set_hub_record_txn(conn: Connection, **values: Any) -> None:
    """Record ``public_url`` and/or ``key_id`` (hub/record.py)."""
    conn.execute(update(hub_state).where(hub_state.c.id == 1).values(**values))


def hub_key_statements_txn(conn: Connection) -> list[str]:
    """The hub key rotation statements (canonical JSON), oldest first (hub/keyrotation.py)."""
    return [r.statement for r in conn.execute(select(hub_keys).order_by(hub_keys.c.seq))]


def insert_hub_key_statement_txn(conn: Connection, *, seq: int, key_id: str,
                                 statement: str, at: int) -> None:
    conn.execute(insert(hub_keys).values(seq=seq, key_id=key_id, statement=statement, at=at))


def schema_revision_txn(conn: Connection) -> str | None:
    """The Alembic revision the database is at."""
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
