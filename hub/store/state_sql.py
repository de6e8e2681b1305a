"""SQL for the signed state (shared/state.py): bucket lattices, bucket digests and roots,
per-batch roots, epoch statements and the devices a space's replicas may need attested.
Functions ending in ``_txn`` run inside a transaction opened by ``Store``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import Connection

from hub.store.sql import Sql, in_statement

_ROOT = Sql("SELECT digests, root FROM state_roots WHERE space_id = :s")
_UPSERT_ROOT = Sql("INSERT INTO state_roots (space_id, digests, root) VALUES (:s, :d, :r) "
                   "ON CONFLICT (space_id) DO UPDATE SET digests = excluded.digests, "
                   "root = excluded.root")
_UPSERT_BUCKET = Sql("INSERT INTO state_buckets (space_id, bucket, lattice) "
                     "VALUES (:s, :b, :l) ON CONFLICT (space_id, bucket) "
                     "DO UPDATE SET lattice = excluded.lattice")
_LATTICES: dict[int, Sql] = {}
_LIVE = Sql("SELECT entry_id, version FROM entries WHERE space_id = :s AND deleted = :f")
_CLEAR = Sql("DELETE FROM state_buckets WHERE space_id = :s")
_BATCH_ROOT = Sql("SELECT state_root FROM batches WHERE space_id = :s AND epoch = :e "
                  "AND seq = :n")
_SET_BATCH_ROOT = Sql("UPDATE batches SET state_root = :r WHERE space_id = :s AND epoch = :e "
                      "AND seq = :n")
_INSERT_EPOCH = Sql("INSERT INTO space_epochs (space_id, epoch, statement, at) "
                    "VALUES (:s, :e, :t, :a)")
_EPOCHS = Sql("SELECT statement FROM space_epochs WHERE space_id = :s ORDER BY at, epoch")
_DEVICES = Sql("SELECT d.id, d.user_id, d.public_key, d.created_at, d.revoked_at "
               "FROM devices d WHERE d.id IN (SELECT device_id FROM batches WHERE space_id = :s)"
               " OR d.user_id IN (SELECT user_id FROM members WHERE space_id = :s) "
               "ORDER BY d.id")


def root_txn(conn: Connection, space_id: str) -> tuple[bytes, str] | None:
    """The space's bucket digests (packed) and root; None when never computed."""
    r = _ROOT.one(conn, {"s": space_id})
    return None if r is None else (bytes(r[0]), r[1])


def set_root_txn(conn: Connection, space_id: str, digests: bytes, root: str) -> None:
    _UPSERT_ROOT.run(conn, {"s": space_id, "d": digests, "r": root})


def lattices_read(space_id: str, buckets: list[int]) -> tuple[Sql, dict[str, Any]]:
    """The statement of ``lattices_txn`` (its rows go to ``lattices_of``)."""
    stmt = in_statement(_LATTICES, len(buckets), lambda marks: (
        f"SELECT bucket, lattice FROM state_buckets WHERE space_id = :s AND bucket IN ({marks})"),
        "b")
    params: dict[str, Any] = {f"b{i}": b for i, b in enumerate(buckets)}
    params["s"] = space_id
    return stmt, params


def lattices_of(rows: list[Any]) -> dict[int, bytes]:
    return {b: bytes(lat) for b, lat in rows}


def lattices_txn(conn: Connection, space_id: str, buckets: list[int]) -> dict[int, bytes]:
    stmt, params = lattices_read(space_id, buckets)
    return lattices_of(stmt.all(conn, params))


def set_lattices_txn(conn: Connection, space_id: str, lattices: dict[int, bytes]) -> None:
    for b, lat in lattices.items():
        _UPSERT_BUCKET.run(conn, {"s": space_id, "b": b, "l": lat})


def clear_lattices_txn(conn: Connection, space_id: str) -> None:
    _CLEAR.run(conn, {"s": space_id})


def iter_live_versions_txn(conn: Connection, space_id: str) -> Iterator[tuple[str, str]]:
    yield from _LIVE.all(conn, {"s": space_id, "f": False})


def batch_root_txn(conn: Connection, space_id: str, epoch: str, seq: int) -> str | None:
    r = _BATCH_ROOT.one(conn, {"s": space_id, "e": epoch, "n": seq})
    return None if r is None else r[0]


def set_batch_root_txn(conn: Connection, space_id: str, epoch: str, seq: int,
                       root: str) -> None:
    _SET_BATCH_ROOT.run(conn, {"s": space_id, "e": epoch, "n": seq, "r": root})


def insert_epoch_txn(conn: Connection, space_id: str, epoch: str, statement: str,
                     at: int) -> None:
    _INSERT_EPOCH.run(conn, {"s": space_id, "e": epoch, "t": statement, "a": at})


def epoch_statements_txn(conn: Connection, space_id: str) -> list[str]:
    return [r[0] for r in _EPOCHS.all(conn, {"s": space_id})]


def space_devices_txn(conn: Connection, space_id: str) -> list[tuple[str, str, str, int,
                                                                     int | None]]:
    """Devices whose batches a replica of the space may hold: authors of its batches and
    devices of its members: ``(id, user, public key, created_at, revoked_at)``."""
    return [tuple(r) for r in _DEVICES.all(conn, {"s": space_id})]  # type: ignore[misc]
