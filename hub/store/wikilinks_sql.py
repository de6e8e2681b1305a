"""SQL for resolving ``[[wiki links]]`` against a space's live entries (hub/wikilinks.py).

Functions ending in ``_txn`` run inside a transaction opened by the store."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from hub.store.sql import Sql

_LIVE = Sql("SELECT entry_id FROM entries WHERE space_id = :s AND entry_id = :id "
            "AND deleted = :f")


def live_txn(conn: Connection, space_id: str, entry_id: str) -> bool:
    return _LIVE.one(conn, {"s": space_id, "id": entry_id, "f": False}) is not None


_NAMED = Sql("SELECT entry_id FROM entries WHERE space_id = :s AND deleted = :f "
             "AND (lower(entry_id) = :whole OR lower(entry_id) LIKE :pat ESCAPE '!') "
             "ORDER BY entry_id LIMIT :lim")


def named_txn(conn: Connection, space_id: str, name: str, limit: int) -> list[str]:
    """Live entries whose id is ``name`` or ends with ``/name``, case-insensitively: the
    candidates shared/links.py ``resolve_wikilink`` picks from by its last step."""
    low = name.lower()
    pat = "%/" + low.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return [str(r[0]) for r in _NAMED.all(conn, {"s": space_id, "f": False, "whole": low,
                                                   "pat": pat, "lim": limit})]
