"""SQL for deleting a space (hub/space_delete.py): the impact counts, the soft delete on
the space row, and the purge of every row that names a space once its retention ended.
``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

import warnings
from typing import Any

from sqlalchemy import MetaData, delete, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SAWarning

from hub.store import schema

t = schema.spaces


def impact_txn(conn: Connection, space_id: str) -> dict[str, int]:
    """What deleting the space takes away from people: counts, no content."""
    def count(table: Any, *where: Any) -> int:
        return int(conn.execute(select(func.count()).select_from(table).where(
            table.c.space_id == space_id, *where)).scalar_one())
    return {"members": count(schema.members),
            "replicas": count(schema.replicas, schema.replicas.c.revoked_at.is_(None)),
            "entries": count(schema.entries, schema.entries.c.deleted.is_(False)),
            "batches": count(schema.batches)}


def set_deleted_txn(conn: Connection, space_id: str, deleted_at: int | None,
                    statement: str | None) -> None:
    """Mark the space deleted (with the hub-signed statement), or clear both (restore)."""
    conn.execute(update(t).where(t.c.id == space_id).values(
        deleted_at=deleted_at, deleted_statement=statement))


def deleted_before_txn(conn: Connection, cutoff: int) -> list[tuple[str, str, int]]:
    """``(id, name, deleted_at)`` of every space deleted at ``cutoff`` or earlier."""
    return [(r.id, r.name, r.deleted_at) for r in conn.execute(
        select(t.c.id, t.c.name, t.c.deleted_at).where(
            t.c.deleted_at.is_not(None), t.c.deleted_at <= cutoff)).all()]


def deleted_at_txn(conn: Connection, space_id: str) -> int | None:
    """When the space was deleted; None when it is not (or no longer exists)."""
    row = conn.execute(select(t.c.deleted_at).where(t.c.id == space_id)).first()
    return None if row is None else row.deleted_at


def reflected(conn: Connection) -> MetaData:
    """The database's own tables and columns, as it holds them now."""
    md = MetaData()
    with warnings.catch_warnings():
        # the expression indexes (ix_entries_lower, the name-collision check) cannot be
        # reflected on SQLite; only the tables and their columns matter to the callers
        warnings.filterwarnings("ignore", "Skipped unsupported reflection",
                                category=SAWarning)
        md.reflect(conn)
    return md


def _space_tables(conn: Connection) -> list[Any]:
    """Every table with a ``space_id`` column, dependents first (PostgreSQL checks the
    foreign keys), read from the database itself: tables of later migrations are
    included without a list to keep up to date."""
    return [tb for tb in reversed(reflected(conn).sorted_tables)
            if "space_id" in tb.c and tb.name != "spaces"]


def purge_space_txn(conn: Connection, space_id: str) -> int:
    """Delete every row that names the space (every table with a ``space_id``, its audit
    chain), then the space row. Returns the rows deleted before the space row."""
    rows = 0
    for tb in _space_tables(conn):
        rows += conn.execute(delete(tb).where(tb.c.space_id == space_id)).rowcount
    rows += conn.execute(delete(schema.audit).where(
        schema.audit.c.chain == space_id)).rowcount
    conn.execute(delete(t).where(t.c.id == space_id))
    return rows
