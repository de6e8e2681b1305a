"""SQL for the conflicts replicas report (hub/conflict_reports.py): a replica's report
replaced in one go, and a space's reports listed with who reported them. ``_txn``
functions run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection

from hub.store.schema import conflict_reports as t
from hub.store.schema import devices, replicas, users


def replace_report_txn(conn: Connection, replica_id: str, rows: list[dict[str, Any]]
                       ) -> None:
    """The replica's previous report deleted, ``rows`` (full rows) inserted."""
    conn.execute(delete(t).where(t.c.replica_id == replica_id))
    if rows:
        conn.execute(insert(t), rows)


def _live(space_id: str) -> Any:
    return (t.c.space_id == space_id) & replicas.c.revoked_at.is_(None)


def member_rows_txn(conn: Connection, space_id: str, user_id: str, but: str) -> int:
    """Conflicts reported in a space by ``user_id``'s live replicas other than ``but``."""
    return int(conn.execute(
        select(func.count()).select_from(t.join(replicas, replicas.c.id == t.c.replica_id))
        .where(_live(space_id), t.c.reported_by == user_id, t.c.replica_id != but)
    ).scalar_one())


def count_reports_txn(conn: Connection, space_id: str) -> tuple[int, int]:
    """(conflicts, distinct entries) the space's live replicas report."""
    r = conn.execute(
        select(func.count(), func.count(t.c.entry_id.distinct()))
        .select_from(t.join(replicas, replicas.c.id == t.c.replica_id))
        .where(_live(space_id))).one()
    return int(r[0]), int(r[1])


def list_reports_txn(conn: Connection, space_id: str, *, limit: int | None = None,
                     offset: int = 0) -> list[Any]:
    """Every live replica's reported conflicts in a space, by entry then replica, with
    ``replica_name``, ``device_name``, ``user_id`` and ``user_name``; ``limit`` rows from
    ``offset`` (a page)."""
    return list(conn.execute(
        select(t, replicas.c.name.label("replica_name"),
               devices.c.name.label("device_name"), devices.c.user_id,
               users.c.name.label("user_name"))
        .join(replicas, replicas.c.id == t.c.replica_id)
        .join(devices, devices.c.id == replicas.c.device_id)
        .join(users, users.c.id == devices.c.user_id)
        .where(_live(space_id))
        .order_by(t.c.entry_id, t.c.replica_id).limit(limit).offset(offset)).all())
