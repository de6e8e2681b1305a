"""SQL for resolving ``[[wiki links]]`` against a space's live entries (hub/wikilinks.py).

Functions ending in ``_txn`` run inside a transaction opened by the store."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from hub.store.sql import Sql

_LIVE = Sql("SELECT entry_id FROM entries WHERE space_id = :s AND entry_id = :id "
            "AND deleted = :f")
_TAIL = Sql("SELECT entry_id FROM entries WHERE space_id = :s AND deleted = :f "
            "AND lower(entry_id) LIKE :pat ESCAPE '!' ORDER BY entry_id LIMIT 1")


def live_txn(conn: Connection, space_id: str, entry_id: str) -> bool:
    return _LIVE.one(conn, {"s": space_id, "id": entry_id, "f": False}) is not None


def first_with_tail_txn(conn: Connection, space_id: str, tail: str) -> str | None:
    """The first live entry (by id) whose id ends with ``/tail`` (case-insensitively)."""
    pat = "%/" + tail.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_")
    r = _TAIL.one(conn, {"s": space_id, "f": False, "pat": pat})
    return None if r is None else str(r[0])
