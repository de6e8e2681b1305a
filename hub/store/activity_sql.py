"""SQL for a space's activity feed (hub/activity.py): its accepted batches, newest first.

Functions ending in ``_txn`` run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from hub.store.sql import Sql


class BatchRow(NamedTuple):
    seq: int
    body: str  # the canonical wire batch
    user_id: str
    device_id: str
    agent: str | None
    accepted_at: int


_NEWEST = Sql("SELECT seq, body, user_id, device_id, agent, accepted_at FROM batches "
              "WHERE space_id = :s AND epoch = :e AND seq < :before "
              "ORDER BY seq DESC LIMIT :lim")
_EPOCHS = Sql("SELECT DISTINCT epoch FROM batches WHERE space_id = :s ORDER BY epoch")


def newest_txn(conn: Connection, space_id: str, epoch: str, before: int, limit: int
               ) -> list[BatchRow]:
    """Batches of ``epoch`` with a seq below ``before``, newest first."""
    rows: list[Any] = _NEWEST.all(conn, {"s": space_id, "e": epoch, "before": before,
                                         "lim": limit})
    return [BatchRow(int(r[0]), r[1], r[2], r[3], r[4], int(r[5])) for r in rows]


def epochs_txn(conn: Connection, space_id: str) -> list[str]:
    """Epochs that hold batches, oldest first (epoch ids sort by creation time)."""
    return [r[0] for r in _EPOCHS.all(conn, {"s": space_id})]
