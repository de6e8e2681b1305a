"""SQL for ``quire hub restore`` (hub/restore.py): the spaces' heads and hub id of the hub
and of the backup, a space's entries read from the backup, and the entries of a space
replaced by them. ``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, inspect, select, text
from sqlalchemy.engine import Connection

from hub.store.schema import entries, hub_state, spaces


def hub_id_txn(conn: Connection) -> str | None:
    """The database's hub id (None: no hub state, not a hub's database)."""
    row = conn.execute(select(hub_state.c.hub_id)).first()
    return None if row is None else row[0]


def space_heads_txn(conn: Connection) -> list[Any]:
    """Every space's id, name, epoch, head_seq, head_digest and deleted_at."""
    return list(conn.execute(select(spaces.c.id, spaces.c.name, spaces.c.epoch,
                                    spaces.c.head_seq, spaces.c.head_digest,
                                    spaces.c.deleted_at)))


def entry_rows_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    """The space's entry rows, every column."""
    return [dict(r._mapping) for r in conn.execute(
        select(entries).where(entries.c.space_id == space_id))]


def replace_entries_txn(conn: Connection, space_id: str, rows: list[dict[str, Any]]
                        ) -> None:
    """Delete the space's entries and insert ``rows`` (full rows, space id included)."""
    conn.execute(delete(entries).where(entries.c.space_id == space_id))
    if rows:
        conn.execute(entries.insert(), rows)


def backup_taken_at_txn(conn: Connection) -> int | None:
    """When the backup this database was made from was taken (``quire hub backup`` marks
    its copies with a ``quire_backup`` row, hub/backup.py); None when it carries no mark
    (a ``pg_dump``, or a database that was never a backup)."""
    if not inspect(conn).has_table("quire_backup"):
        return None
    row = conn.execute(text("SELECT taken_at FROM quire_backup")).first()
    return int(row[0]) if row is not None else None


def forget_backup_mark_txn(conn: Connection) -> None:
    """Drop the ``quire_backup`` mark: the database is the hub's own again."""
    if inspect(conn).has_table("quire_backup"):
        conn.execute(text("DROP TABLE quire_backup"))
