"""SQL for entries and batches: the touched entries' current versions and contents, the
entry writes and the batch row of a publication, receipts, and the change feed and
snapshot reads. ``_txn`` functions run inside a transaction opened by the store; the
``*_reads`` functions return statements for ``read_together`` (hub/store/sql.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from hub.store.log_sql import leaf_txn
from hub.store.schema import batches, entries
from hub.store.sql import Read, Sql, driver_error
from shared import tlog
from shared.canonical import canonical_str
from shared.merkle import leaf_hash

_VERSIONS: dict[int, Sql] = {}


def _versions_sql(n: int) -> Sql:
    stmt = _VERSIONS.get(n)
    if stmt is None:
        marks = ", ".join(f":e{i}" for i in range(n))
        stmt = _VERSIONS[n] = Sql("SELECT entry_id, version, deleted FROM entries "
                                  f"WHERE space_id = :s AND entry_id IN ({marks})")
    return stmt


def _chunks(space_id: str, entry_ids: list[str]) -> Iterator[dict[str, Any]]:
    for i in range(0, len(entry_ids), 500):
        params: dict[str, Any] = {f"e{j}": eid for j, eid in enumerate(entry_ids[i:i + 500])}
        params["s"] = space_id
        yield params


def versions_reads(space_id: str, entry_ids: list[str]) -> list[Read]:
    """The statements of ``current_versions_txn`` (parse their rows with ``versions_of``)."""
    return [(_versions_sql(len(p) - 1), p) for p in _chunks(space_id, entry_ids)]


def versions_of(results: list[list[Any]]) -> dict[str, tuple[str, bool]]:
    return {eid: (version, bool(deleted)) for rows in results
            for eid, version, deleted in rows}


def current_versions_txn(conn: Connection, space_id: str, entry_ids: list[str]
                         ) -> dict[str, tuple[str, bool]]:
    """``entry_id -> (version, deleted)`` for the touched entries that exist."""
    return versions_of([stmt.all(conn, params)
                        for stmt, params in versions_reads(space_id, entry_ids)])


_CONTENTS: dict[int, Sql] = {}


def contents_reads(space_id: str, entry_ids: list[str]) -> list[Read]:
    """The statements of ``current_contents_txn`` (parse their rows with ``dict``)."""
    out = []
    for p in _chunks(space_id, entry_ids):
        n = len(p) - 1
        stmt = _CONTENTS.get(n)
        if stmt is None:
            marks = ", ".join(f":e{j}" for j in range(n))
            stmt = _CONTENTS[n] = Sql("SELECT entry_id, content FROM entries WHERE "
                                      f"space_id = :s AND deleted = false AND entry_id IN "
                                      f"({marks})")
        out.append((stmt, p))
    return out


def current_contents_txn(conn: Connection, space_id: str, entry_ids: list[str]
                         ) -> dict[str, str]:
    """``entry_id -> canonical content`` of the given entries that are live."""
    return {eid: content for stmt, params in contents_reads(space_id, entry_ids)
            for eid, content in stmt.all(conn, params)}


_INSERT_ENTRY = Sql("INSERT INTO entries (space_id, entry_id, version, deleted, content, seq, "
                    "epoch, key_digest) VALUES (:space_id, :entry_id, :version, :deleted, "
                    ":content, :seq, :epoch, :key_digest)")


_UPDATE_ENTRY = Sql("UPDATE entries SET version = :version, deleted = :deleted, "
                    "content = :content, seq = :seq, epoch = :epoch, "
                    "key_digest = :key_digest "
                    "WHERE space_id = :space_id AND entry_id = :entry_id")


def upsert_entries_txn(conn: Connection, space_id: str, epoch: str, seq: int,
                       rows: list[dict[str, Any]], existing: set[str]) -> None:
    """Write new entry states; ``existing`` are the ids that already have a row. A row's
    ``key_digest``: a live guardrail's key digest (hub/policy.py ``key_digest_of``), else
    None."""
    pg = conn.dialect.name == "postgresql"
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for stmt, part in ((_INSERT_ENTRY, [r for r in rows if r["entry_id"] not in existing]),
                           (_UPDATE_ENTRY, [r for r in rows if r["entry_id"] in existing])):
            if part:
                sql = stmt.pg if pg else stmt.sqlite
                params = [dict(r, deleted=bool(r["deleted"]), space_id=space_id, epoch=epoch,
                               seq=seq) for r in part]
                try:
                    if len(params) == 1:  # the usual case; psycopg's executemany pipelines
                        cur.execute(sql, params[0])
                    else:
                        cur.executemany(sql, params)
                except conn.dialect.loaded_dbapi.Error as e:
                    raise driver_error(conn, sql, params, e) from e
    finally:
        cur.close()


_HEAD_AT = Sql("SELECT head_digest FROM batches WHERE space_id = :s AND epoch = :e AND seq = :n")


def head_digest_at_txn(conn: Connection, space_id: str, epoch: str, seq: int) -> str | None:
    """The head digest the space had right after batch ``seq`` of ``epoch``."""
    r = _HEAD_AT.one(conn, {"s": space_id, "e": epoch, "n": seq})
    return None if r is None else r[0]


class PriorBatch(NamedTuple):
    space_id: str
    digest: str
    receipt: str


_BATCH_BY_IDS = Sql("SELECT space_id, digest, receipt FROM batches "
                    "WHERE replica_id = :r AND batch_id = :b")


_BATCH_COLS = ("space_id", "epoch", "seq", "batch_id", "replica_id", "digest", "head_digest",
               "user_id", "device_id", "agent", "accepted_at", "body", "receipt",
               "state_root")


_INSERT_BATCH = Sql(f"INSERT INTO batches ({', '.join(_BATCH_COLS)}) "
                    f"VALUES ({', '.join(':' + c for c in _BATCH_COLS)})")


def batch_by_ids_txn(conn: Connection, replica_id: str, batch_id: str) -> PriorBatch | None:
    r = _BATCH_BY_IDS.one(conn, {"r": replica_id, "b": batch_id})
    return None if r is None else PriorBatch(*r)


def insert_batch_txn(conn: Connection, **values: Any) -> None:
    """The batch row and, in the same breath, its leaf in the space log (hub/spacelog.py:
    every accepted batch is in the log, whichever path published it). Inside ``pipelined``
    the log's one read costs one round trip."""
    _INSERT_BATCH.run(conn, values)
    data = canonical_str(tlog.batch_leaf(epoch=values["epoch"], seq=values["seq"],
                                         head=values["head_digest"], batch=values["digest"]))
    leaf_txn(conn, values["space_id"], data, leaf_hash(data.encode()), values["epoch"],
             values["seq"])


def iter_changes_txn(conn: Connection, space_id: str, epoch: str, after: int, limit: int
                     ) -> Iterator[Any]:
    q = (select(batches.c.seq, batches.c.head_digest, batches.c.accepted_at, batches.c.user_id,
                batches.c.device_id, batches.c.agent, batches.c.body, batches.c.receipt)
         .where(and_(batches.c.space_id == space_id, batches.c.epoch == epoch,
                     batches.c.seq > after))
         .order_by(batches.c.seq).limit(limit))
    yield from conn.execution_options(yield_per=200).execute(q)


def iter_live_entries_txn(conn: Connection, space_id: str) -> Iterator[Any]:
    q = (select(entries.c.entry_id, entries.c.version, entries.c.content, entries.c.seq)
         .where(and_(entries.c.space_id == space_id, entries.c.deleted.is_(False)))
         .order_by(entries.c.entry_id))
    yield from conn.execution_options(yield_per=500).execute(q)


def live_entries_txn(conn: Connection, space_id: str, entry_ids: list[str]) -> list[Any]:
    """The rows ``iter_live_entries_txn`` yields, of the given entries that are live, by id."""
    q = (select(entries.c.entry_id, entries.c.version, entries.c.content, entries.c.seq)
         .where(and_(entries.c.space_id == space_id, entries.c.deleted.is_(False),
                     entries.c.entry_id.in_(entry_ids)))
         .order_by(entries.c.entry_id))
    return list(conn.execute(q))


def count_live_entries_txn(conn: Connection, space_id: str) -> int:
    return int(conn.execute(select(func.count()).select_from(entries).where(
        (entries.c.space_id == space_id) & entries.c.deleted.is_(False))).scalar_one())
