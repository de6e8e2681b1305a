"""SQL for the conflicts replicas report (hub/conflict_reports.py): a replica's report
replaced in one go, and a space's reports listed with who reported them. ``_txn``
functions run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from hub.store.schema import conflict_reports as t
from hub.store.schema import devices, replicas, users


def replace_report_txn(conn: Connection, replica_id: str, rows: list[dict[str, Any]]
                       ) -> None:
    """The replica's previous report deleted, ``rows`` (full rows) inserted."""
    conn.execute(delete(t).where(t.c.replica_id == replica_id))
    if rows:
        conn.execute(insert(t), rows)


def list_reports_txn(conn: Connection, space_id: str) -> list[Any]:
    """Every live replica's reported conflicts in a space, by entry then replica, with
    ``replica_name``, ``device_name``, ``user_id`` and ``user_name``."""
    return list(conn.execute(
        select(t, replicas.c.name.label("replica_name"),
               devices.c.name.label("device_name"), devices.c.user_id,
               users.c.name.label("user_name"))
        .join(replicas, replicas.c.id == t.c.replica_id)
        .join(devices, devices.c.id == replicas.c.device_id)
        .join(users, users.c.id == devices.c.user_id)
        .where(t.c.space_id == space_id, replicas.c.revoked_at.is_(None))
        .order_by(t.c.entry_id, t.c.replica_id)).all())
