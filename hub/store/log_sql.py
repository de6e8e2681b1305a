"""SQL for the space log (hub/spacelog.py; shared/merkle.py): its perfect nodes, how far
they are built, and the witness policies.

    log_nodes        (space, level, idx) → hash; a leaf (level 0) also names the head it
                     leads to (epoch, seq): the log's size at a head is 1 + the index of
                     its last leaf, read with the head, whatever committed since
    space_logs       space → size, built, frontier: every perfect node above the leaves
                     exists for the first ``built`` leaves (past that a root is computed
                     from the leaves); when built = size, ``frontier`` holds the nodes the
                     root is made of, and an append builds its nodes at once
    witness_policies (space, n) → the hub-signed policy statement (canonical JSON)

A leaf is written in the transaction that decides it (``leaf_txn``: one read of the space's
row, then writes: inside the guard's pipelined writes the read costs one round trip), with
the perfect nodes it completes (amortized one more row). Tables live on the schema's one
``metadata`` (hub/store/schema.py), created by migration 0028.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    Table,
    Text,
)
from sqlalchemy.engine import Connection

from hub.store.schema import ID, metadata
from hub.store.sql import Sql
from shared import merkle

log_nodes = Table(
    "log_nodes", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("level", Integer, primary_key=True, autoincrement=False),
    Column("idx", BigInteger, primary_key=True, autoincrement=False),
    Column("hash", LargeBinary, nullable=False),  # 32 bytes
    Column("epoch", ID, nullable=True),  # leaves only: the head the leaf leads to
    Column("seq", BigInteger, nullable=True),
    Column("data", Text, nullable=True),  # leaves only: the leaf's data (canonical JSON)
    Index("ix_log_nodes_head", "space_id", "epoch", "seq"),
)

space_logs = Table(
    "space_logs", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("built", BigInteger, nullable=False),
    Column("frontier", LargeBinary, nullable=True),  # 32 bytes per node; valid when built=size
)

witness_policies = Table(
    "witness_policies", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("n", Integer, primary_key=True, autoincrement=False),
    Column("statement", Text, nullable=False),  # hub-signed (canonical JSON)
    Column("leaf", BigInteger, nullable=False),  # its leaf's index in the log
    Column("at", BigInteger, nullable=False),
)

_INSERT_NODE = {
    "sqlite": Sql("INSERT OR IGNORE INTO log_nodes (space_id, level, idx, hash) "
                  "VALUES (:s, :l, :i, :h)"),
    "postgresql": Sql("INSERT INTO log_nodes (space_id, level, idx, hash) "
                      "VALUES (:s, :l, :i, :h) ON CONFLICT DO NOTHING"),
}
_STATE = Sql("SELECT size, built, frontier FROM space_logs WHERE space_id = :s")
_INSERT_LEAF = Sql("INSERT INTO log_nodes (space_id, level, idx, hash, epoch, seq, data) "
                   "VALUES (:s, 0, :i, :h, :e, :n, :d)")
_PUT_STATE = {
    "sqlite": Sql("INSERT INTO space_logs (space_id, size, built, frontier) VALUES "
                  "(:s, :size, :built, :f) ON CONFLICT (space_id) DO UPDATE SET "
                  "size = excluded.size, built = excluded.built, frontier = excluded.frontier"),
    "postgresql": Sql("INSERT INTO space_logs (space_id, size, built, frontier) VALUES "
                      "(:s, :size, :built, :f) ON CONFLICT (space_id) DO UPDATE SET "
                      "size = excluded.size, built = excluded.built, "
                      "frontier = excluded.frontier"),
}


def _split(frontier: bytes) -> list[bytes]:
    return [frontier[i:i + 32] for i in range(0, len(frontier), 32)]


def leaf_txn(conn: Connection, space_id: str, data: str, leaf: bytes, epoch: str, seq: int
             ) -> None:
    """Append a leaf (its data and hash) after the space's last; it leads to head
    ``(epoch, seq)``. Runs under the space lock (the publication's, an epoch's, a policy's).
    When the log is built to its end, the nodes the leaf completes are written with it."""
    row = _STATE.one(conn, {"s": space_id})
    if row is None:  # a space logged before its first append here (migration 0028)
        size = size_txn(conn, space_id)
        built, frontier = 0, (b"" if size == 0 else None)
    else:
        size, built, frontier = int(row[0]), int(row[1]), row[2]
        frontier = None if frontier is None else bytes(frontier)
    _INSERT_LEAF.run(conn, {"s": space_id, "i": size, "h": leaf, "e": epoch, "n": seq,
                            "d": data})
    new_frontier = None
    if built == size and frontier is not None:
        nodes, added = merkle.append(size, _split(frontier), leaf)
        new_frontier = b"".join(nodes)
        stmt = _INSERT_NODE.get(conn.dialect.name, _INSERT_NODE["sqlite"])
        for (level, idx), h in added[1:]:  # the leaf itself is written above
            stmt.run(conn, {"s": space_id, "l": level, "i": idx, "h": h})
        built = size + 1
    _PUT_STATE.get(conn.dialect.name, _PUT_STATE["sqlite"]).run(
        conn, {"s": space_id, "size": size + 1, "built": built, "f": new_frontier})


_LEAF_DATA = Sql("SELECT data FROM log_nodes WHERE space_id = :s AND level = 0 AND idx = :i")


def leaf_data_txn(conn: Connection, space_id: str, idx: int) -> str | None:
    r = _LEAF_DATA.one(conn, {"s": space_id, "i": idx})
    return None if r is None else r[0]


_SIZE_AT = Sql("SELECT MAX(idx) FROM log_nodes WHERE space_id = :s AND epoch = :e "
               "AND seq = :n AND level = 0")
_SIZE = Sql("SELECT MAX(idx) FROM log_nodes WHERE space_id = :s AND level = 0")


def size_at_txn(conn: Connection, space_id: str, epoch: str, seq: int) -> int | None:
    """The log's size right after head ``(epoch, seq)``: None when no leaf leads to it
    (the genesis of a space's first epoch, or a head from before migration 0028)."""
    r = _SIZE_AT.one(conn, {"s": space_id, "e": epoch, "n": seq})
    return None if r is None or r[0] is None else int(r[0]) + 1


def size_txn(conn: Connection, space_id: str) -> int:
    r = _SIZE.one(conn, {"s": space_id})
    return 0 if r is None or r[0] is None else int(r[0]) + 1


_BUILT = Sql("SELECT built FROM space_logs WHERE space_id = :s")


def built_txn(conn: Connection, space_id: str) -> int:
    r = _BUILT.one(conn, {"s": space_id})
    return 0 if r is None else int(r[0])


def nodes_txn(conn: Connection, space_id: str, keys: Iterable[tuple[int, int]]
              ) -> dict[tuple[int, int], bytes]:
    """The stored hashes of the given ``(level, idx)`` nodes (those that exist): one
    statement per 200 nodes (a root or a proof reads at most a few dozen)."""
    want = sorted(set(keys))
    out: dict[tuple[int, int], bytes] = {}
    for i in range(0, len(want), 200):
        part = want[i:i + 200]
        terms = " OR ".join(f"(level = :l{j} AND idx = :i{j})" for j in range(len(part)))
        params: dict[str, Any] = {"s": space_id}
        for j, (level, idx) in enumerate(part):
            params[f"l{j}"], params[f"i{j}"] = level, idx
        for level, idx, h in Sql(f"SELECT level, idx, hash FROM log_nodes WHERE space_id = :s "
                                 f"AND ({terms})").all(conn, params):
            out[(int(level), int(idx))] = bytes(h)
    return out


_LEAF_AT = Sql("SELECT idx FROM log_nodes WHERE space_id = :s AND level = 0 AND epoch = :e "
               "AND seq = :n ORDER BY idx")


def leaf_indexes_txn(conn: Connection, space_id: str, epoch: str, seq: int) -> list[int]:
    """The indexes of the leaves that lead to head ``(epoch, seq)`` (a batch, and a policy
    set at that head after it)."""
    return [int(r[0]) for r in _LEAF_AT.all(conn, {"s": space_id, "e": epoch, "n": seq})]


_SET_BUILT = Sql("UPDATE space_logs SET built = :b, frontier = :f WHERE space_id = :s AND "
                 "size = :b AND built < :b")
_ENSURE = {
    "sqlite": Sql("INSERT OR IGNORE INTO space_logs (space_id, size, built) "
                  "VALUES (:s, :size, 0)"),
    "postgresql": Sql("INSERT INTO space_logs (space_id, size, built) VALUES (:s, :size, 0) "
                      "ON CONFLICT DO NOTHING"),
}


def insert_nodes_txn(conn: Connection, space_id: str, nodes: Iterable[tuple[tuple[int, int],
                                                                            bytes]],
                     built: int, frontier: list[bytes]) -> None:
    """Store perfect nodes above the leaves (a node already there is the same hash: the
    tree is a function of its leaves); the log counts as built to ``built`` (with its
    ``frontier``) when no leaf was appended past it meanwhile."""
    stmt = _INSERT_NODE.get(conn.dialect.name, _INSERT_NODE["sqlite"])
    for (level, idx), h in nodes:
        stmt.run(conn, {"s": space_id, "l": level, "i": idx, "h": h})
    _ENSURE.get(conn.dialect.name, _ENSURE["sqlite"]).run(
        conn, {"s": space_id, "size": size_txn(conn, space_id)})
    _SET_BUILT.run(conn, {"s": space_id, "b": built, "f": b"".join(frontier)})


_POLICY = Sql("SELECT statement FROM witness_policies WHERE space_id = :s AND leaf < :size "
              "ORDER BY n DESC LIMIT 1")
_AT_HEAD = Sql(
    "SELECT l.size, l.built, l.frontier, (SELECT MAX(idx) FROM log_nodes WHERE space_id = :s "
    "AND epoch = :e AND seq = :n AND level = 0), (SELECT statement FROM witness_policies "
    "WHERE space_id = :s AND leaf < l.size ORDER BY n DESC LIMIT 1) "
    "FROM space_logs l WHERE l.space_id = :s")


def at_head_txn(conn: Connection, space_id: str, epoch: str, seq: int
                ) -> tuple[int, list[bytes], str | None] | None:
    """A head's log in one statement, when it is the whole log and built to its end (the
    usual case: the space's current head): (size, frontier hashes, policy statement in
    force). None otherwise (the caller reads it the long way: ``size_at_txn`` …). One
    statement reads one snapshot, so the size and the head's last leaf agree."""
    r = _AT_HEAD.one(conn, {"s": space_id, "e": epoch, "n": seq})
    if r is None or r[2] is None or r[3] is None:
        return None
    size, built, last = int(r[0]), int(r[1]), int(r[3])
    if not size == built == last + 1:
        return None
    return size, _split(bytes(r[2])), None if r[4] is None else str(r[4])
_POLICIES = Sql("SELECT statement FROM witness_policies WHERE space_id = :s ORDER BY n")
_INSERT_POLICY = Sql("INSERT INTO witness_policies (space_id, n, statement, leaf, at) "
                     "VALUES (:s, :n, :st, :leaf, :at)")


def policy_txn(conn: Connection, space_id: str, size: int = 2**62) -> str | None:
    """The policy in force in a log of ``size`` leaves (the newest whose leaf it holds)."""
    r = _POLICY.one(conn, {"s": space_id, "size": size})
    return None if r is None else str(r[0])


def policies_txn(conn: Connection, space_id: str) -> list[str]:
    return [str(r[0]) for r in _POLICIES.all(conn, {"s": space_id})]


def insert_policy_txn(conn: Connection, space_id: str, n: int, statement: str, leaf: int,
                      at: int) -> None:
    _INSERT_POLICY.run(conn, {"s": space_id, "n": n, "st": statement, "leaf": leaf, "at": at})
