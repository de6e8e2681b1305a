"""SQL for a purge (hub/purge.py): find every stored copy of some entries' content, remove
it, then make the database give the freed bytes back.

Where an entry's content is stored on the hub, and what a purge does there:

    entries          the current state                      row deleted
    batches.body     every accepted batch, every epoch      the entry's ops cut out of the
                                                            canonical body (``purged`` lists
                                                            the ids); other ops stay
    entry_versions   read index: versions by (epoch, seq)   rows deleted
    entry_text       read index: searchable text            rows deleted (the FTS5 index on
                     (+ entry_fts on SQLite)                SQLite is then optimized, which
                                                            drops the deleted terms)

Nothing else holds content: receipts, audit events, screening allowances and conflict
reports hold ids, versions and digests only. Deleted rows still sit in free pages, SQLite's
WAL and PostgreSQL's dead tuples until ``compact`` runs (after the purge commits).
Functions ending in ``_txn`` run inside a transaction opened by the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import Connection, Engine

from hub.store.sql import Sql
from shared.canonical import canonical_str
from shared.wire import op_entry_id

# a prefilter: an entry id in a body is a JSON string; '_' in an id is a LIKE wildcard, which
# only widens the match (each candidate body is parsed and checked)
_CANDIDATES = Sql("SELECT epoch, seq, body FROM batches WHERE space_id = :s "
                  "AND body LIKE :pat ORDER BY epoch, seq")
_SET_BODY = Sql("UPDATE batches SET body = :b WHERE space_id = :s AND epoch = :e "
                "AND seq = :n")
_ENTRY = Sql("SELECT version, deleted FROM entries WHERE space_id = :s AND entry_id = :id")
_DELETE_ENTRY = Sql("DELETE FROM entries WHERE space_id = :s AND entry_id = :id")
_DELETE_VERSIONS = Sql("DELETE FROM entry_versions WHERE space_id = :s AND entry_id = :id")
_DELETE_TEXT = Sql("DELETE FROM entry_text WHERE space_id = :s AND entry_id = :id")
_FTS_OPTIMIZE = Sql("INSERT INTO entry_fts(entry_fts) VALUES ('optimize')")

# the tables a purge rewrites: VACUUM FULL on PostgreSQL
PG_TABLES = ("batches", "entries", "entry_versions", "entry_text", "blobs", "blob_uploads")


def touching_batches_txn(conn: Connection, space_id: str, ids: set[str]
                         ) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(epoch, seq, parsed body)`` of every stored batch with an op on one of ``ids``."""
    seen: set[tuple[str, int]] = set()
    for entry_id in sorted(ids):
        pat = "%" + json.dumps(entry_id)[1:-1] + "%"
        for epoch, seq, body in _CANDIDATES.all(conn, {"s": space_id, "pat": pat}):
            if (epoch, int(seq)) in seen:
                continue
            parsed = json.loads(body)
            if any(op_entry_id(op) in ids for op in parsed.get("ops", [])):
                seen.add((epoch, int(seq)))
                yield epoch, int(seq), parsed


def scrub_body(body: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    """Pure: the stored batch without its ops on ``ids``; ``purged`` names the ids cut out
    (the body no longer matches its digest: it is history for reads, never served as a
    batch to verify, since a purge always starts a new epoch)."""
    ops = body.get("ops", [])
    cut = {eid for op in ops if (eid := op_entry_id(op)) is not None and eid in ids}
    kept = [op for op in ops if op_entry_id(op) not in ids]
    return dict(body, ops=kept, purged=sorted(set(body.get("purged", [])) | set(cut)))


def set_body_txn(conn: Connection, space_id: str, epoch: str, seq: int, body: dict[str, Any]
                 ) -> None:
    _SET_BODY.run(conn, {"s": space_id, "e": epoch, "n": seq, "b": canonical_str(body)})


def entry_txn(conn: Connection, space_id: str, entry_id: str) -> tuple[str, bool] | None:
    r = _ENTRY.one(conn, {"s": space_id, "id": entry_id})
    return None if r is None else (r[0], bool(r[1]))


def delete_entry_txn(conn: Connection, space_id: str, entry_id: str) -> None:
    """The entry's current row and its read-index rows (versions, searchable text)."""
    params = {"s": space_id, "id": entry_id}
    for stmt in (_DELETE_ENTRY, _DELETE_VERSIONS, _DELETE_TEXT):
        stmt.run(conn, params)


def optimize_search_txn(conn: Connection) -> None:
    """SQLite: merge the full-text index so deleted rows' terms leave its segments."""
    if conn.dialect.name == "sqlite":
        _FTS_OPTIMIZE.run(conn, {})


def compact(engine: Engine, attempts: int = 20) -> dict[str, Any]:
    """After the purge commits: give freed pages back so the deleted bytes are gone from the
    files. SQLite: ``VACUUM`` (rewrites the database without free pages) then
    ``wal_checkpoint(TRUNCATE)`` (the WAL, which held the old pages, is emptied), retried
    while a reader holds the WAL. PostgreSQL: ``VACUUM FULL`` of the rewritten tables (dead
    tuples gone from the table files). Answers what was done, for the purge's report."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in PG_TABLES:
                conn.exec_driver_sql(f"VACUUM FULL {table}")
        return {"vacuum": "full", "tables": list(PG_TABLES)}
    raw = engine.raw_connection()  # driver-level autocommit: VACUUM runs outside BEGIN
    try:
        cur = raw.cursor()
        cur.execute("VACUUM")
        truncated = False
        for _ in range(attempts):
            busy = cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if busy == 0:
                truncated = True
                break
            time.sleep(0.05)
        cur.close()
    finally:
        raw.close()
    return {"vacuum": True, "wal_truncated": truncated}
