"""SQL for the read index (hub/reads.py): entry versions by (epoch, seq) and full-text search.

The index is derived from the batches: ``read_index`` says up to which (epoch, seq) a
space is indexed; ``entry_versions`` has one row per entry per accepted change (plus base
rows at seq 0 that carry an epoch's starting state over); ``entry_text`` holds the text of
every live entry at the indexed head, searched with FTS5 on SQLite and a ``tsvector`` on
PostgreSQL. Functions ending in ``_txn`` run inside a transaction opened by the store.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from hub.store.sql import Sql


class IndexState(NamedTuple):
    epoch: str
    seq: int


_STATE = Sql("SELECT epoch, seq FROM read_index WHERE space_id = :s")
_STATE_LOCKED_PG = Sql("SELECT epoch, seq FROM read_index WHERE space_id = :s FOR UPDATE")
_STATE_INSERT = Sql("INSERT INTO read_index (space_id, epoch, seq) VALUES (:s, '', -1) "
                    "ON CONFLICT (space_id) DO NOTHING")
_STATE_SET = Sql("UPDATE read_index SET epoch = :e, seq = :n WHERE space_id = :s")


def state_txn(conn: Connection, space_id: str) -> IndexState | None:
    r = _STATE.one(conn, {"s": space_id})
    return None if r is None or r[1] < 0 else IndexState(r[0], int(r[1]))


def lock_state_txn(conn: Connection, space_id: str) -> IndexState | None:
    """The index state, locked for this write transaction (one indexer per space at a time;
    on SQLite the write transaction already excludes every other writer)."""
    _STATE_INSERT.run(conn, {"s": space_id})
    stmt = _STATE_LOCKED_PG if conn.dialect.name == "postgresql" else _STATE
    r = stmt.one(conn, {"s": space_id})
    return None if r is None or r[1] < 0 else IndexState(r[0], int(r[1]))


def set_state_txn(conn: Connection, space_id: str, epoch: str, seq: int) -> None:
    _STATE_SET.run(conn, {"s": space_id, "e": epoch, "n": seq})


_EPOCHS = Sql("SELECT DISTINCT epoch FROM batches WHERE space_id = :s ORDER BY epoch")
_BATCHES = Sql("SELECT seq, body FROM batches WHERE space_id = :s AND epoch = :e "
               "AND seq > :after ORDER BY seq LIMIT :lim")


def epochs_txn(conn: Connection, space_id: str) -> list[str]:
    """Epochs that hold batches, oldest first (epoch ids sort by creation time)."""
    return [r[0] for r in _EPOCHS.all(conn, {"s": space_id})]


def batches_after_txn(conn: Connection, space_id: str, epoch: str, after: int, limit: int
                      ) -> list[tuple[int, str]]:
    return [(int(r[0]), r[1]) for r in
            _BATCHES.all(conn, {"s": space_id, "e": epoch, "after": after, "lim": limit})]


_VERSION_INSERT = Sql(
    "INSERT INTO entry_versions (space_id, entry_id, epoch, seq, version, deleted, "
    "src_epoch, src_seq) VALUES (:s, :id, :e, :n, :v, :d, :se, :sn) "
    "ON CONFLICT (space_id, entry_id, epoch, seq) DO NOTHING")
_CARRY_OVER = Sql(
    "INSERT INTO entry_versions (space_id, entry_id, epoch, seq, version, deleted, "
    "src_epoch, src_seq) "
    "SELECT v.space_id, v.entry_id, :e, 0, v.version, v.deleted, v.src_epoch, v.src_seq "
    "FROM entry_versions v WHERE v.space_id = :s AND v.epoch = :prev AND v.deleted = :f "
    "AND v.seq = (SELECT MAX(w.seq) FROM entry_versions w WHERE w.space_id = v.space_id "
    "AND w.entry_id = v.entry_id AND w.epoch = v.epoch) "
    "ON CONFLICT (space_id, entry_id, epoch, seq) DO NOTHING")


def add_version_txn(conn: Connection, space_id: str, entry_id: str, epoch: str, seq: int,
                    version: str, deleted: bool) -> None:
    _VERSION_INSERT.run(conn, {"s": space_id, "id": entry_id, "e": epoch, "n": seq,
                               "v": version, "d": deleted, "se": epoch, "sn": seq})


def carry_over_txn(conn: Connection, space_id: str, prev: str, epoch: str) -> None:
    """Base rows (seq 0) of ``epoch``: every entry live at the end of ``prev``."""
    _CARRY_OVER.run(conn, {"s": space_id, "prev": prev, "e": epoch, "f": False})


class VersionRow(NamedTuple):
    epoch: str
    seq: int
    version: str
    deleted: bool
    src_epoch: str
    src_seq: int


_AT = Sql("SELECT epoch, seq, version, deleted, src_epoch, src_seq FROM entry_versions "
          "WHERE space_id = :s AND entry_id = :id AND epoch = :e AND seq <= :n "
          "ORDER BY seq DESC LIMIT 1")
_HISTORY = Sql("SELECT epoch, seq, version, deleted, src_epoch, src_seq FROM entry_versions "
               "WHERE space_id = :s AND entry_id = :id AND seq > 0 "
               "ORDER BY epoch DESC, seq DESC LIMIT :lim")
_HISTORY_BEFORE = Sql(
    "SELECT epoch, seq, version, deleted, src_epoch, src_seq FROM entry_versions "
    "WHERE space_id = :s AND entry_id = :id AND seq > 0 "
    "AND (epoch < :e OR (epoch = :e AND seq < :n)) "
    "ORDER BY epoch DESC, seq DESC LIMIT :lim")
_BATCH_AT = Sql("SELECT body, user_id, device_id, agent, accepted_at FROM batches "
                "WHERE space_id = :s AND epoch = :e AND seq = :n")


def version_at_txn(conn: Connection, space_id: str, entry_id: str, epoch: str, seq: int
                   ) -> VersionRow | None:
    r = _AT.one(conn, {"s": space_id, "id": entry_id, "e": epoch, "n": seq})
    return None if r is None else VersionRow(r[0], int(r[1]), r[2], bool(r[3]), r[4],
                                             int(r[5]))


def history_txn(conn: Connection, space_id: str, entry_id: str, limit: int,
                before: IndexState | None = None) -> list[VersionRow]:
    """The entry's version rows, newest first; ``before``: only those older than that
    (epoch, seq) (the history of the id a rename there came from: hub/reads.py)."""
    params: dict[str, Any] = {"s": space_id, "id": entry_id, "lim": limit}
    stmt = _HISTORY
    if before is not None:
        stmt = _HISTORY_BEFORE
        params.update(e=before.epoch, n=before.seq)
    return [VersionRow(r[0], int(r[1]), r[2], bool(r[3]), r[4], int(r[5]))
            for r in stmt.all(conn, params)]


def batch_at_txn(conn: Connection, space_id: str, epoch: str, seq: int) -> Any:
    """(body, user_id, device_id, agent, accepted_at) of one stored batch, or None."""
    return _BATCH_AT.one(conn, {"s": space_id, "e": epoch, "n": seq})


def put_in_batch_txn(conn: Connection, space_id: str, epoch: str, seq: int, entry_id: str
                     ) -> dict[str, Any] | None:
    """The entry as batch ``seq`` of ``epoch`` put it, or None (the batch is not held, or
    it did not put that entry): how a version row's content is read back."""
    found = batch_at_txn(conn, space_id, epoch, seq)
    if found is None:
        return None
    for op in json.loads(found[0])["ops"]:
        if op["op"] == "put" and op["entry"]["id"] == entry_id:
            return dict(op["entry"])
    return None


_TEXT_DELETE = Sql("DELETE FROM entry_text WHERE space_id = :s AND entry_id = :id")
_TEXT_INSERT = Sql("INSERT INTO entry_text (space_id, entry_id, title, tags, body) "
                   "VALUES (:s, :id, :title, :tags, :body)")


_TEXT_CLEAR = Sql("DELETE FROM entry_text WHERE space_id = :s")


def clear_text_txn(conn: Connection, space_id: str) -> None:
    _TEXT_CLEAR.run(conn, {"s": space_id})


def set_text_txn(conn: Connection, space_id: str, entry_id: str,
                 text: tuple[str, str, str] | None) -> None:
    """The searchable text of one entry at the indexed head (``None``: deleted)."""
    _TEXT_DELETE.run(conn, {"s": space_id, "id": entry_id})
    if text is not None:
        title, tags, body = text
        _TEXT_INSERT.run(conn, {"s": space_id, "id": entry_id, "title": title, "tags": tags,
                                "body": body})


# CROSS JOIN keeps the FTS5 table outermost: with a plain JOIN SQLite's planner walked the
# space's rows and probed the full-text index per row (500 ms for no match in 2,000 entries,
# 0.05 ms this way).
_SEARCH_SQLITE = Sql(
    "SELECT t.entry_id, t.title, t.body "
    "FROM entry_fts f CROSS JOIN entry_text t ON t.rowid = f.rowid "
    "WHERE entry_fts MATCH :q AND t.space_id = :s ORDER BY bm25(entry_fts), t.entry_id "
    "LIMIT :lim")
_COUNT_SQLITE = Sql(
    "SELECT COUNT(*) FROM entry_fts f CROSS JOIN entry_text t ON t.rowid = f.rowid "
    "WHERE entry_fts MATCH :q AND t.space_id = :s")
_SEARCH_PG = Sql(
    "SELECT entry_id, title, body FROM entry_text "
    "WHERE space_id = :s AND doc @@ to_tsquery('simple', :q) "
    "ORDER BY ts_rank_cd(doc, to_tsquery('simple', :q)) DESC, entry_id LIMIT :lim")
_COUNT_PG = Sql("SELECT COUNT(*) FROM entry_text "
                "WHERE space_id = :s AND doc @@ to_tsquery('simple', :q)")


def search_txn(conn: Connection, space_id: str, terms: list[str], limit: int
               ) -> tuple[int, list[tuple[str, str, str]]]:
    """Entries whose title, tags or body hold every term (words of letters and digits,
    matched whole and case-insensitively); (total, [(entry_id, title, body)])."""
    if conn.dialect.name == "postgresql":
        query, search, count = " & ".join(terms), _SEARCH_PG, _COUNT_PG
    else:
        query = " AND ".join('"' + t + '"' for t in terms)
        search, count = _SEARCH_SQLITE, _COUNT_SQLITE
    params = {"s": space_id, "q": query, "lim": limit}
    total = int(count.one(conn, params)[0])
    return total, [(r[0], r[1], r[2]) for r in search.all(conn, params)]


_LIST_LIVE = Sql("SELECT e.entry_id, e.version, e.seq, e.content, b.accepted_at "
                 "FROM entries e LEFT JOIN batches b ON b.space_id = e.space_id "
                 "AND b.epoch = e.epoch AND b.seq = e.seq "
                 "WHERE e.space_id = :s AND e.deleted = :f AND e.entry_id > :after "
                 "AND substr(e.entry_id, 1, :plen) = :prefix ORDER BY e.entry_id LIMIT :lim")
# the live guardrails whatever their path (a key digest: hub/policy.py ``key_digest_of``,
# the partial index ``ix_entries_key_digest``): what an agent's world model must show
_LIST_GUARDRAILS = Sql("SELECT e.entry_id, e.version, e.seq, e.content, b.accepted_at "
                       "FROM entries e LEFT JOIN batches b ON b.space_id = e.space_id "
                       "AND b.epoch = e.epoch AND b.seq = e.seq "
                       "WHERE e.space_id = :s AND e.deleted = :f AND e.entry_id > :after "
                       "AND e.key_digest IS NOT NULL ORDER BY e.entry_id LIMIT :lim")
_LIVE_ENTRY = Sql("SELECT version, seq, content FROM entries "
                  "WHERE space_id = :s AND entry_id = :id AND deleted = :f")


def list_live_txn(conn: Connection, space_id: str, prefix: str, after: str, limit: int
                  ) -> list[tuple[str, str, int, str, int | None]]:
    """Live entries at the head with ids after ``after`` that start with ``prefix``: id,
    version, seq, content and when the batch that last changed it was accepted (None for
    an entry a restore wrote, which no batch of the space carries)."""
    rows = _LIST_LIVE.all(conn, {"s": space_id, "f": False, "after": after,
                                 "plen": len(prefix), "prefix": prefix, "lim": limit})
    return [(r[0], r[1], int(r[2]), r[3], None if r[4] is None else int(r[4]))
            for r in rows]


def list_live_guardrails_txn(conn: Connection, space_id: str, after: str, limit: int
                             ) -> list[tuple[str, str, int, str, int | None]]:
    """The live guardrails in any folder (``list_live_txn``'s rows), by id after ``after``."""
    rows = _LIST_GUARDRAILS.all(conn, {"s": space_id, "f": False, "after": after,
                                       "lim": limit})
    return [(r[0], r[1], int(r[2]), r[3], None if r[4] is None else int(r[4]))
            for r in rows]


def live_entry_txn(conn: Connection, space_id: str, entry_id: str
                   ) -> tuple[str, int, str] | None:
    r = _LIVE_ENTRY.one(conn, {"s": space_id, "id": entry_id, "f": False})
    return None if r is None else (r[0], int(r[1]), r[2])
