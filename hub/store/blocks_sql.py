"""SQL for blocked versions (hub/blocks.py): the publication path's look-up as plain SQL,
and the admins' block and listing. ``_txn`` functions run inside a transaction opened by
the store."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from hub.store.schema import blocked_versions as t
from hub.store.sql import Read, Sql


@functools.lru_cache(maxsize=64)
def _blocked_sql(n: int) -> Sql:
    """The look-up for ``n`` entry ids, one statement per count."""
    marks = ", ".join(f":e{i}" for i in range(n))
    return Sql("SELECT entry_id, version, seq FROM blocked_versions "
               f"WHERE space_id = :s AND entry_id IN ({marks})")


def blocked_read(space_id: str, entry_ids: list[str]) -> Read:
    """The blocked versions of these entries, as a statement for ``read_together``: rows of
    ``(entry_id, version, seq)``. ``entry_ids`` is not empty."""
    return _blocked_sql(len(entry_ids)), {"s": space_id,
                                          **{f"e{i}": e for i, e in enumerate(entry_ids)}}


def blocked_txn(conn: Connection, space_id: str, entry_ids: list[str]) -> list[Any]:
    """``blocked_read`` run on its own."""
    stmt, params = blocked_read(space_id, entry_ids)
    return stmt.all(conn, params)


def blocked_pairs_txn(conn: Connection, space_id: str, entry_ids: list[str]
                      ) -> set[tuple[str, str]]:
    """The ``(entry_id, version)`` pairs already blocked among these entries."""
    return {(r.entry_id, r.version) for r in conn.execute(
        select(t.c.entry_id, t.c.version).where(
            t.c.space_id == space_id, t.c.entry_id.in_(entry_ids))).all()}


def insert_blocks_txn(conn: Connection, rows: list[dict[str, Any]]) -> None:
    conn.execute(t.insert(), rows)


def list_blocks_txn(conn: Connection, space_id: str, limit: int) -> list[Any]:
    """A space's blocked versions, newest first."""
    return list(conn.execute(select(t).where(t.c.space_id == space_id).order_by(
        t.c.created_at.desc(), t.c.entry_id).limit(limit)).all())
