"""SQL for screening allows (hub/screening.py): the guard's look-up and the admins' allows.
``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from hub.store.schema import screening_allows as t


def allows_of_txn(conn: Connection, space_id: str, entry_ids: Sequence[str]) -> list[Any]:
    """The allows of these entries (any version, any rule)."""
    return list(conn.execute(select(t).where(t.c.space_id == space_id,
                                             t.c.entry_id.in_(sorted(set(entry_ids))))).all())


def find_allow_txn(conn: Connection, space_id: str, entry_id: str, version: str, rule: str
                   ) -> Any:
    """The allow of exactly this entry version and rule, or None."""
    return conn.execute(select(t).where(
        t.c.space_id == space_id, t.c.entry_id == entry_id,
        t.c.version == version, t.c.rule == rule)).first()


def insert_allow_txn(conn: Connection, **values: Any) -> None:
    conn.execute(t.insert().values(**values))


def list_allows_txn(conn: Connection, space_id: str, entry_id: str | None, limit: int
                    ) -> list[Any]:
    """A space's allows, newest first; ``entry_id`` narrows to one entry."""
    stmt = select(t).where(t.c.space_id == space_id)
    if entry_id is not None:
        stmt = stmt.where(t.c.entry_id == entry_id)
    return list(conn.execute(stmt.order_by(t.c.created_at.desc(), t.c.id.desc())
                             .limit(limit)).all())
