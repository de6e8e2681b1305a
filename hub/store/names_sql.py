"""SQL for name collisions (hub/admission.py ``check_names_txn``): the live entries whose id,
lowered, is one of given names, by the expression index ``ix_entries_lower`` (0027).

``lower()`` is ASCII-only on SQLite and follows the database's ctype on PostgreSQL, so the
caller asks with every lowering it can compare with and checks each row with
``shared.names.fold`` itself. ``_txn`` functions run inside a transaction opened by the
store."""

from __future__ import annotations

from typing import Any

from hub.store.sql import Read, Sql

_LOWERED: dict[int, Sql] = {}


def lowered_reads(space_id: str, lowered: list[str]) -> list[Read]:
    """The statements of ``live_lowered_txn``, for ``read_together`` (rows: ``lowered_of``)."""
    out: list[Read] = []
    for i in range(0, len(lowered), 500):
        part = lowered[i:i + 500]
        stmt = _LOWERED.get(len(part))
        if stmt is None:
            marks = ", ".join(f":f{j}" for j in range(len(part)))
            stmt = _LOWERED[len(part)] = Sql(
                "SELECT entry_id FROM entries WHERE space_id = :s AND lower(entry_id) IN "
                f"({marks}) AND deleted = false")
        params: dict[str, Any] = {f"f{j}": f for j, f in enumerate(part)}
        params["s"] = space_id
        out.append((stmt, params))
    return out


def lowered_of(results: list[list[Any]]) -> list[str]:
    return [str(r[0]) for rows in results for r in rows]


def live_lowered_txn(conn: Any, space_id: str, lowered: list[str]) -> list[str]:
    """The ids of the space's live entries whose ``lower(entry_id)`` is in ``lowered``."""
    return lowered_of([stmt.all(conn, params)
                       for stmt, params in lowered_reads(space_id, lowered)])
