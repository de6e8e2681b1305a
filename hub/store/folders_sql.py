"""SQL for the folder tree (shared/foldertree.py): one row per folder of a space's live
entries, its direct entries' lattice and count, its digest; the top folder ``""`` always
has a row once built (no row: never built, ``hub/signed_state.py`` rebuilds it from the
entries). Created by migration 0030.

    folder_nodes (space, folder) → parent, lattice (2048 bytes), size, digest (32 bytes)
                 indexed by (space, parent): a folder's children in one range
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import BigInteger, Column, ForeignKey, Index, LargeBinary, String, Table
from sqlalchemy.engine import Connection

from hub.store.schema import ID, metadata
from hub.store.sql import Read, Sql, in_statement
from shared import foldertree as ft

folder_nodes = Table(
    "folder_nodes", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("folder", String(240), primary_key=True),
    Column("parent", String(240), nullable=True),  # null for the top folder ""
    Column("lattice", LargeBinary, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("digest", LargeBinary, nullable=False),
    Index("ix_folder_nodes_parent", "space_id", "parent"),
)

_READS: dict[int, Sql] = {}
_UPSERT = Sql("INSERT INTO folder_nodes (space_id, folder, parent, lattice, size, digest) "
              "VALUES (:s, :f, :p, :l, :n, :d) ON CONFLICT (space_id, folder) DO UPDATE SET "
              "lattice = excluded.lattice, size = excluded.size, digest = excluded.digest")
_DELETE = Sql("DELETE FROM folder_nodes WHERE space_id = :s AND folder = :f")
_CLEAR = Sql("DELETE FROM folder_nodes WHERE space_id = :s")
_TOP = Sql("SELECT digest FROM folder_nodes WHERE space_id = :s AND folder = ''")
_UNBUILT = Sql("SELECT id FROM spaces WHERE id NOT IN "
               "(SELECT space_id FROM folder_nodes WHERE folder = '') ORDER BY id")


def nodes_read(space_id: str, folders: list[str]) -> Read:
    """The kept nodes of ``folders`` and of all their children (rows: ``nodes_of``)."""
    stmt = in_statement(_READS, len(folders), lambda marks: (
        "SELECT folder, lattice, size, digest FROM folder_nodes WHERE space_id = :s "
        f"AND (folder IN ({marks}) OR parent IN ({marks}))"), "f")
    params: dict[str, Any] = {f"f{i}": f for i, f in enumerate(folders)}
    params["s"] = space_id
    return stmt, params


def nodes_of(rows: Iterable[Any]) -> dict[str, ft.Node]:
    return {f: ft.Node(bytes(lat), int(n), bytes(d)) for f, lat, n, d in rows}


def nodes_txn(conn: Connection, space_id: str, folders: list[str]) -> dict[str, ft.Node]:
    stmt, params = nodes_read(space_id, folders)
    return nodes_of(stmt.all(conn, params))


def write_txn(conn: Connection, space_id: str, nodes: dict[str, ft.Node],
              gone: Iterable[str]) -> None:
    """Write the folders ``advance`` changed and delete those it left empty (no read)."""
    for f in gone:
        _DELETE.run(conn, {"s": space_id, "f": f})
    for f, n in nodes.items():
        _UPSERT.run(conn, {"s": space_id, "f": f, "p": None if f == ft.TOP else ft.folder_of(f),
                           "l": n.lattice, "n": n.size, "d": n.digest})


def clear_txn(conn: Connection, space_id: str) -> None:
    _CLEAR.run(conn, {"s": space_id})


def top_txn(conn: Connection, space_id: str) -> str | None:
    """The kept tree root (hex); None when the tree was never built."""
    r = _TOP.one(conn, {"s": space_id})
    return None if r is None else bytes(r[0]).hex()


def unbuilt_txn(conn: Connection) -> list[str]:
    """The spaces whose tree was never built (created before migration 0030)."""
    return [r[0] for r in _UNBUILT.all(conn, {})]
