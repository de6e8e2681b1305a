"""SQL for quota usage (hub/quotas.py): the ``space_quota`` row of a space (its counts and
own limits), the counts it is computed from, and the hub's total. The publication path's
two statements are plain SQL (hub/store/sql.py). ``_txn`` functions run inside a
transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.engine import Connection

from hub.store.schema import space_quota
from hub.store.sql import Sql

_QUOTA_COLS = ("space_id", "entries", "bytes", "history_bytes", "max_entries", "max_bytes",
               "max_history_bytes")
_GET_LOCKED = {"sqlite": Sql(f"SELECT {', '.join(_QUOTA_COLS)} FROM space_quota "
                             "WHERE space_id = :s"),  # BEGIN IMMEDIATE serializes writers
               "postgresql": Sql(f"SELECT {', '.join(_QUOTA_COLS)} FROM space_quota "
                                 "WHERE space_id = :s FOR UPDATE")}
_COUNT = Sql("UPDATE space_quota SET entries = :e, bytes = :b, history_bytes = :h "
             "WHERE space_id = :s")


def _octets(conn: Connection, col: str) -> str:
    return f"octet_length({col})" if conn.dialect.name == "postgresql" \
        else f"length(CAST({col} AS BLOB))"


def live_counts_txn(conn: Connection, space_id: str) -> tuple[int, int]:
    """The space's live entries and the bytes of their contents, with the bytes of the
    attachments it holds (hub/blobs.py: counted when uploaded)."""
    n, size = conn.execute(text(
        f"SELECT COUNT(*), COALESCE(SUM({_octets(conn, 'content')}), 0) FROM entries "
        "WHERE space_id = :s AND NOT deleted"), {"s": space_id}).one()
    held = conn.execute(text("SELECT COALESCE(SUM(size), 0) FROM blobs WHERE space_id = :s"),
                        {"s": space_id}).scalar_one()
    return int(n), int(size) + int(held)


def history_bytes_txn(conn: Connection, space_id: str) -> int:
    """The bytes of the space's stored batches."""
    return int(conn.execute(text(
        f"SELECT COALESCE(SUM({_octets(conn, 'body')}), 0) FROM batches "
        "WHERE space_id = :s"), {"s": space_id}).scalar_one())


def usage_row_txn(conn: Connection, space_id: str, *, lock: bool = False
                  ) -> dict[str, Any] | None:
    """The space's ``space_quota`` row (``lock``: FOR UPDATE on PostgreSQL), or None."""
    stmt = select(space_quota).where(space_quota.c.space_id == space_id)
    if lock and conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    row = conn.execute(stmt).mappings().first()
    return None if row is None else dict(row)


def locked_usage_txn(conn: Connection, space_id: str) -> dict[str, Any] | None:
    """``usage_row_txn(lock=True)`` as the publication path runs it (plain SQL)."""
    row = _GET_LOCKED[conn.dialect.name].one(conn, {"s": space_id})
    return None if row is None else dict(zip(_QUOTA_COLS, row, strict=True))


def insert_usage_txn(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(space_quota.insert().values(**row))


def update_usage_txn(conn: Connection, space_id: str, values: dict[str, Any]) -> None:
    """Set columns of the space's row (counts or limits)."""
    conn.execute(update(space_quota).where(space_quota.c.space_id == space_id)
                 .values(**values))


def write_counts_txn(conn: Connection, counts: dict[str, Any]) -> None:
    """The publication's new counts: ``{"s": space, "e": entries, "b": bytes,
    "h": history bytes}``."""
    _COUNT.run(conn, counts)


def hub_total_bytes_txn(conn: Connection) -> int:
    """Every space's bytes and history bytes, together (read without a lock)."""
    return int(conn.execute(text(
        "SELECT COALESCE(SUM(bytes + history_bytes), 0) FROM space_quota")).scalar_one())
