"""The local store of one joined space: SQLite through ``sqlite3`` (replica/store/db.py).

What it keeps (docs/replica.md, "Store"):

- ``entries``: per entry the *synced* state (the hub's version as last applied; a tombstone
  when the hub deleted it) and the *local* state (what this machine has; ``NULL`` when it
  is absent here), plus the stat and hash of the vault file last seen or written, and
  whether the entry is *held* in conflict. An entry is dirty when local != synced. Each
  state is stored once: ``local`` is ``''`` when it is the synced entry, ``file_base`` is
  ``''`` when it is the local entry (``SAME``; never valid JSON, so a reader that does not
  know the convention fails loudly instead of taking it for an absent entry).
- ``outbox``: the one batch being published, saved (with its id and signature) before it
  is sent, so a crash anywhere is recovered by replaying the same batch.
- ``meta``: the last synced head (epoch, seq, digest) and the replica's identity.
- ``history``: every batch applied, in order (seq, digest, author).
- ``conflicts``: held entries with base, ours and theirs (and the author of theirs), what
  conflict packets are built from.
- ``vault_pending``: vault writes decided in a committed transaction but maybe not yet done
  (a write-ahead journal: replayed at the start of the next sync after a crash).

Functions that must run inside a transaction take a connection and end in ``_txn``.
"""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from replica.store.db import Conn, Database, OperationalError

# the store's values live in replica/store/records.py; callers reach them as st.<name> too
from replica.store.records import (
    SAME,
    TOMBSTONE_PREFIX,
    Conflict,
    EntryState,
    Head,
    _same_entry,
    entry_from_json,
    entry_json,
    live_version,  # noqa: F401 - re-exported
    stored_entry,
    version_of,
    with_canonical,  # noqa: F401 - re-exported
)
from replica.store.schema import (  # noqa: F401 - re-exported: st.UNSETTLED_WHERE, …
    _DROP_DIGEST,
    DIGEST_KEY,
    DIGEST_TRIGGERS,
    DIRTY_WHERE,
    ENTRIES_COVER,
    LINKS_BUILT,
    LINKS_TAIL,
    LINKS_TRIGGERS,
    PARTIAL_INDEXES,
    STATE_READY,
    STATE_TRIGGERS,
    TABLES_DDL,
    UNSETTLED_WHERE,
)
from shared import state
from shared.digest import digest_of
from shared.entry import Entry


class Store:
    """One space's store. Open with ``Store(path)``; ``tx()`` gives a transaction."""

    def __init__(self, path: Path, *, durable: bool = True):
        """``durable=False`` skips fsync (tests only: a crash may then lose the last commit)."""
        self.path = path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.engine = Database(path, (
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=OFF",
            "PRAGMA busy_timeout=10000"))
        with self.tx() as conn:
            _upgrade_txn(conn)
            for ddl in TABLES_DDL:
                conn.execute(ddl)
            conn.execute(ENTRIES_COVER)
            for ddl in PARTIAL_INDEXES + (LINKS_TAIL,):
                conn.execute(ddl)
            for trigger in DIGEST_TRIGGERS + STATE_TRIGGERS + LINKS_TRIGGERS:
                conn.execute(trigger)

    def close(self) -> None:
        """Close the connections kept between uses (``Database.keep_open``: the watcher's,
        a ``quire sync``'s); without them each use opened and closed its own."""
        self.engine.keep_open(0)

    @contextmanager
    def tx(self, *, durable: bool = True) -> Iterator[Conn]:
        """``durable=False`` (the record of vault writes already made, replica/engine/sync.py
        ``_flush_chunk``): the commit is not fsynced. A power cut may lose it and nothing
        committed before it; what it recorded is then redone from the journal it clears."""
        with self.engine.begin(durable=durable) as conn:
            yield conn

    # ------------------------------------------------------------ meta and head

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self.engine.connect() as conn:
            return get_meta_txn(conn, key, default)

    def set_meta(self, key: str, value: Any) -> None:
        with self.tx() as conn:
            set_meta_txn(conn, key, value)

    def head(self) -> Head | None:
        with self.engine.connect() as conn:
            return head_txn(conn)

    # ------------------------------------------------------------ reads

    def states(self) -> dict[str, EntryState]:
        with self.engine.connect() as conn:
            return states_txn(conn)

    def conflicts(self) -> list[Conflict]:
        with self.engine.connect() as conn:
            return conflicts_txn(conn)

    @contextmanager
    def snapshot(self) -> Iterator[Conn]:
        """A read-only transaction: every read in it sees the same commit (SQLite's read
        snapshot, taken at its first read), whatever a sync commits meanwhile. Rolled back
        at the end; it writes nothing."""
        with self.engine.connect() as conn:
            conn.connection.execute("BEGIN")
            yield conn

    def outbox(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return outbox_txn(conn)

    def history(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [r._asdict() for r in conn.execute("SELECT * FROM history ORDER BY n")]

    def pending_vault_writes(self) -> list[tuple[str, str | None, str | None]]:
        with self.engine.connect() as conn:
            return pending_vault_writes_txn(conn)

    def digest(self) -> str:
        """Digest of the synced state: equal on two replicas that hold the same hub state.

        From the state root (``digest_over_txn``: O(buckets), not O(entries)), cached in
        ``meta`` until a synced version changes (triggers drop the cache) or the head
        moves."""
        try:
            with self.tx() as conn:
                return cached_digest_txn(conn)
        except OperationalError:  # a writer got in first (busy): answer without caching
            with self.engine.connect() as conn:
                head = head_txn(conn)
                return digest_over_txn(conn, head.to_json() if head else None)

    def dirty_count(self) -> int:
        with self.engine.connect() as conn:
            return int(_rows(conn, "SELECT count(*) FROM entries INDEXED BY entries_dirty"
                                   " WHERE " + DIRTY_WHERE)[0][0])

    def dirty_states(self) -> dict[str, EntryState]:
        with self.engine.connect() as conn:
            return dirty_states_txn(conn)

    def synced_guardrails(self) -> dict[str, Entry]:
        """The live guardrails as last synced, by id: what the local check judges a
        guardrail that takes another's key against (shared/policy.py ``key_takeovers``)."""
        with self.engine.connect() as conn:
            return synced_guardrails_txn(conn)


# ---------------------------------------------------------------- transaction functions


def _upgrade_txn(conn: Conn) -> None:
    """Bring a store made by an older version up to this schema (idempotent)."""
    hist = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(history)")}
    if hist and "detail" not in hist:  # batches applied before have no detail: ids only
        conn.exec_driver_sql("ALTER TABLE history ADD COLUMN detail TEXT")
    cols = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(entries)")}
    if not cols:
        return  # a new store: create_all makes it
    if "synced_deleted" not in cols:
        for col in ("synced", "local"):
            conn.exec_driver_sql(f"ALTER TABLE entries ADD COLUMN {col}_deleted BOOLEAN")
            conn.exec_driver_sql(
                f"UPDATE entries SET {col}_deleted = substr({col}, 1, {len(TOMBSTONE_PREFIX)})"
                f" = '{TOMBSTONE_PREFIX}' WHERE {col} IS NOT NULL")
    if "file_base" not in cols:
        conn.exec_driver_sql("ALTER TABLE entries ADD COLUMN file_base TEXT")
        # a file with no pending write and no conflict block was written from (or read as)
        # the local state; elsewhere the base is unknown and stays NULL (no merge on scan)
        conn.exec_driver_sql(
            "UPDATE entries SET file_base = local WHERE file_hash IS NOT NULL AND NOT held"
            " AND id NOT IN (SELECT entry_id FROM vault_pending)")
    if "shown_hash" not in cols:
        for col in ("shown_hash", "shown_marker"):
            conn.exec_driver_sql(f"ALTER TABLE entries ADD COLUMN {col} VARCHAR(64)")
        # what the file showed: with no journaled write, what the store recorded of it (a
        # held entry's file carries its marker); with one, the hash that write expected to
        # replace, and no marker known (its removal is then never taken for a resolution)
        conn.exec_driver_sql(
            "UPDATE entries SET shown_hash = file_hash, shown_marker = CASE WHEN held THEN"
            " (SELECT coalesce(c.theirs_version, '') FROM conflicts c"
            " WHERE c.entry_id = entries.id) END"
            " WHERE id NOT IN (SELECT entry_id FROM vault_pending)")
        conn.exec_driver_sql(
            "UPDATE entries SET shown_hash = (SELECT prev_hash FROM vault_pending v"
            " WHERE v.entry_id = entries.id) WHERE id IN (SELECT entry_id FROM vault_pending)")


def cached_digest_txn(conn: Conn) -> str:
    """``Store.digest`` in this transaction: the cached one, or computed and cached."""
    head = head_txn(conn)
    head_json = head.to_json() if head else None
    cached = get_meta_txn(conn, DIGEST_KEY)
    if cached is not None and cached.get("head") == head_json:
        return str(cached["digest"])
    digest = digest_over_txn(conn, head_json)
    set_meta_txn(conn, DIGEST_KEY, {"head": head_json, "digest": digest})
    return digest


def read_digest_txn(conn: Conn) -> str:
    """``cached_digest_txn`` without writing: the cached digest, or computed (a read-only
    transaction, ``Store.snapshot``)."""
    head = head_txn(conn)
    head_json = head.to_json() if head else None
    cached = get_meta_txn(conn, DIGEST_KEY)
    if cached is not None and cached.get("head") == head_json:
        return str(cached["digest"])
    return digest_over_txn(conn, head_json)


def conflicts_txn(conn: Conn) -> list[Conflict]:
    return [_conflict(r) for r in conn.execute("SELECT * FROM conflicts ORDER BY entry_id")]


def digest_over_txn(conn: Conn, head_json: dict[str, Any] | None) -> str:
    """The digest of the head and the state root of the synced live entries
    (shared/state.py): read from the state tables replica/trust/verify.py keeps up to date
    (O(buckets)) when they hold every change, else computed from the entries. Either way
    the same value: two replicas that applied the same hub state have the same digest."""
    digests = list(state.EMPTY_DIGESTS)
    own: dict[int, bytes] | None = None
    if get_meta_txn(conn, STATE_READY, False) and _one(conn, "SELECT 1 FROM state_log LIMIT 1",
                                                       ()) is None:
        for b, d in conn.connection.execute("SELECT bucket, digest FROM state_buckets"):
            digests[b] = bytes(d)
    else:  # (a store not yet verified, or a change not yet folded in: the entries decide)
        live = [(i, sv) for i, sv, _lv, _h in live_versions_txn(conn) if sv is not None]
        own = state.lattices_of(live)
        digests = state.digests_with(digests, own)
    digests = fold_withheld_txn(conn, digests, own)
    return digest_of({"head": head_json, "state": state.root_of(digests)})


def withheld_txn(conn: Conn) -> dict[int, bytes]:
    """The withheld sums (schema.py ``WITHHELD_DDL``): bucket → lattice; empty for a
    replica that holds the whole space."""
    return {int(b): bytes(lat) for b, lat in
            conn.connection.execute("SELECT bucket, lattice FROM withheld_buckets")}


def set_withheld_txn(conn: Conn, lattices: dict[int, bytes], *, replace: bool = False) -> None:
    """Write these buckets' withheld sums (``replace``: and drop every other bucket's)."""
    cur = conn.connection.cursor()
    try:
        if replace:
            cur.execute("DELETE FROM withheld_buckets")
        cur.executemany("INSERT OR REPLACE INTO withheld_buckets (bucket, lattice) VALUES "
                        "(?, ?)", sorted(lattices.items()))
    finally:
        cur.close()


def fold_withheld_txn(conn: Conn, digests: list[bytes], own: dict[int, bytes] | None = None
                      ) -> list[bytes]:
    """The bucket ``digests`` of the store's own entries with the withheld sums folded in
    (``own``: their lattices when at hand, else read from ``state_buckets``): the digests
    of the space's whole live set, as the hub signs it."""
    held = withheld_txn(conn)
    if not held:
        return digests
    if own is None:
        marks = ", ".join("?" * len(held))
        own = {int(b): bytes(lat) for b, lat in conn.connection.execute(
            f"SELECT bucket, lattice FROM state_buckets WHERE bucket IN ({marks})",
            tuple(held))}
    sums = state.sum_lattices([{b: own[b] for b in held if b in own}, held])
    return state.digests_with(digests, sums)


def _one(conn: Conn, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The first row of a plain SQL query on the transaction's DBAPI connection (the hot
    paths: no expression building, compilation or result processing per statement)."""
    cur = conn.connection.cursor()
    try:
        cur.execute(sql, params)
        return cur.fetchone()  # type: ignore[no-any-return]
    finally:
        cur.close()


def _run(conn: Conn, sql: str, params: tuple[Any, ...]) -> int:
    """Run a plain SQL write on the transaction's DBAPI connection; the rows it changed."""
    cur = conn.connection.cursor()
    try:
        cur.execute(sql, params)
        return int(cur.rowcount)
    finally:
        cur.close()


def get_meta_txn(conn: Conn, key: str, default: Any = None) -> Any:
    row = _one(conn, "SELECT value FROM meta WHERE key = ?", (key,))
    return default if row is None else json.loads(row[0])


def set_meta_txn(conn: Conn, key: str, value: Any) -> None:
    # one statement where a delete and an insert ran (meta has no triggers)
    _run(conn, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
         (key, json.dumps(value)))


def drop_meta_txn(conn: Conn, key: str) -> None:
    _run(conn, "DELETE FROM meta WHERE key = ?", (key,))


def head_txn(conn: Conn) -> Head | None:
    h = get_meta_txn(conn, "head")
    return None if h is None else Head(h["epoch"], h["seq"], h["digest"])


def set_head_txn(conn: Conn, head: Head) -> None:
    set_meta_txn(conn, "head", head.to_json())


def _state(r: Any) -> EntryState:
    synced = stored_entry(r.synced, r.synced_version)
    local = synced if r.local == SAME else stored_entry(r.local, r.local_version)
    base = local if r.file_base == SAME else stored_entry(r.file_base)
    return EntryState(r.id, synced, local, r.file_hash, r.file_size, r.file_mtime_ns,
                      bool(r.held), base, r.shown_hash, r.shown_marker)


def _texts(s: EntryState) -> tuple[str | None, str | None, str | None]:
    """(synced, local, file_base) as stored: each entry's JSON once (``SAME`` for a repeat)."""
    synced = entry_json(s.synced)
    local = SAME if s.synced is not None and _same_entry(s.local, s.synced) else entry_json(
        s.local)
    base = SAME if s.local is not None and _same_entry(s.file_base, s.local) else entry_json(
        s.file_base)
    return synced, local, base


def states_txn(conn: Conn) -> dict[str, EntryState]:
    return {r.id: _state(r) for r in conn.execute(
        f"SELECT {', '.join(_STATE_COLS)} FROM entries ORDER BY id")}


def dirty_ids_txn(conn: Conn) -> list[str]:
    """The non-held entries whose local state differs from the synced one, from the index."""
    return [r[0] for r in _rows(conn, "SELECT id FROM entries INDEXED BY entries_dirty"
                                      " WHERE " + DIRTY_WHERE + " ORDER BY id")]


def synced_guardrails_txn(conn: Conn) -> dict[str, Entry]:
    """The synced live guardrails, by their effective kind (shared/kinds.py): the
    ``guardrail/*`` range of the primary key ('0' follows '/'), and the entries whose
    synced content has a ``kind`` key (a guardrail elsewhere says so in its front matter).
    Read only when a change takes a guardrail key (replica/engine/push.py)."""
    out = {}
    for r in _rows(conn, "SELECT id, synced, synced_version FROM entries WHERE synced IS NOT "
                         "NULL AND ((id >= 'guardrail/' AND id < 'guardrail0') OR synced "
                         "LIKE '%\"kind\":%')"):
        e = stored_entry(r[1], r[2])
        if e is not None and not e.deleted and e.kind == "guardrail":
            out[r[0]] = e
    return out


def dirty_states_txn(conn: Conn) -> dict[str, EntryState]:
    """The non-held entries whose local state differs from the synced one (by id): only
    those rows are read and rebuilt."""
    return {i: get_state_txn(conn, i) for i in dirty_ids_txn(conn)}



def _rows(conn: Conn, sql: str) -> list[tuple[Any, ...]]:
    """Plain tuples from the DBAPI cursor (in the same transaction): the index queries
    return a row per entry, and SQLAlchemy's row objects cost more than the query."""
    cur = conn.connection.cursor()
    try:
        cur.execute(sql)
        return list(cur.fetchall())
    finally:
        cur.close()


def file_stats_txn(conn: Conn) -> dict[str, tuple[str | None, int | None, int | None,
                                                         bool]]:
    """Per entry (file hash, size, mtime, held): what a vault scan compares, nothing parsed."""
    return {r[0]: r[1:] for r in _rows(
        conn, "SELECT id, file_hash, file_size, file_mtime_ns, held"
              " FROM entries INDEXED BY entries_cover")}


def pending_vault_writes_txn(conn: Conn) -> list[tuple[str, str | None, str | None]]:
    """(entry id, content or None for a delete, hash of the file it may replace) per
    journaled vault write, by entry id: what the file last showed (the entry's
    ``shown_hash``; when the store has none, what it had recorded of the file when the
    write was journaled)."""
    return _rows(conn, "SELECT v.entry_id, v.content, coalesce(e.shown_hash, v.prev_hash)"
                       " FROM vault_pending v LEFT JOIN entries e ON e.id = v.entry_id"
                       " ORDER BY v.entry_id")


def pending_ids_txn(conn: Conn) -> set[str]:
    """The entries with a journaled vault write not yet carried out."""
    return {r[0] for r in _rows(conn, "SELECT entry_id FROM vault_pending")}


def file_index_txn(conn: Conn) -> list[tuple[str, int | None, int | None]]:
    """(id, size, mtime) of every entry with a recorded vault file, from the covering index:
    what ``vaultscan.scan_changes`` compares the vault with."""
    return _rows(conn, "SELECT id, file_size, file_mtime_ns FROM entries INDEXED BY"
                       " entries_cover WHERE file_hash IS NOT NULL")


def live_versions_txn(conn: Conn) -> list[tuple[str, str | None, str | None, bool]]:
    """(id, live synced version, live local version, held) per entry, from the stored
    versions (a tombstone counts as absent), from the covering index alone."""
    return _rows(conn, "SELECT id, CASE WHEN synced_deleted THEN NULL ELSE synced_version END,"
                       " CASE WHEN local_deleted THEN NULL ELSE local_version END, held"
                       " FROM entries INDEXED BY entries_cover ORDER BY id")


def snapshot_index_txn(conn: Conn) -> dict[str, tuple[str | None, str | None, bool,
                                                            bool]]:
    """Per entry (synced version, local version, held, has a file), plus every entry with
    a journaled vault write as (None, None, True, True): what applying a snapshot needs to
    tell an unchanged or new entry from one that must be merged."""
    out = {r[0]: (r[1], r[2], bool(r[3]), r[4] is not None) for r in _rows(
        conn, "SELECT id, synced_version, local_version, held, file_hash"
              " FROM entries INDEXED BY entries_cover")}
    for (entry_id,) in _rows(conn, "SELECT entry_id FROM vault_pending"):
        out[entry_id] = (None, None, True, True)
    return out


_INSERT = ("INSERT INTO entries (id, synced, synced_version, local, local_version, file_hash,"
           " file_size, file_mtime_ns, held, file_base, synced_deleted, local_deleted,"
           " shown_hash, shown_marker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def insert_cloned_txn(conn: Conn, rows: list[tuple[str, str, str, str, int, int]]) -> None:
    """Insert entries a snapshot brought that this store has no row for, each with the file
    written from it: ``(id, canonical JSON, version, file hash, size, mtime)``; synced,
    local and file base are the one entry (``SAME``), and the file shows it. One statement
    (executemany on the DBAPI cursor: plain tuples, no row objects)."""
    if rows:
        cur = conn.connection.cursor()
        try:
            cur.executemany(_INSERT, [(i, text, v, SAME, v, h, size, mtime, False, SAME,
                                       False, False, h, None)
                                      for i, text, v, h, size, mtime in rows])
        finally:
            cur.close()


_TRIGGER_NAMES = [t.split()[5] for t in DIGEST_TRIGGERS + STATE_TRIGGERS + LINKS_TRIGGERS]


def triggers_off_txn(conn: Conn) -> None:
    """Drop the digest and state triggers in this transaction, for a bulk load into an
    empty ``entries`` (a first clone: ~10 µs a row); ``triggers_on_txn`` must follow in the
    same transaction (a rollback restores them with everything else)."""
    for name in _TRIGGER_NAMES:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def triggers_on_txn(conn: Conn) -> None:
    """The triggers back, and what they would have done for the rows loaded meanwhile: the
    digest cache dropped; the state log cleared, for the caller to rebuild the state from
    every row (replica/trust/verify.py ``rebuild_state_txn``); the links index marked for
    a rebuild when next read (replica/store/links.py)."""
    for trigger in DIGEST_TRIGGERS + STATE_TRIGGERS + LINKS_TRIGGERS:
        conn.execute(trigger)
    conn.execute(_DROP_DIGEST)
    drop_meta_txn(conn, LINKS_BUILT)
    conn.execute("DELETE FROM state_log")


def _deleted(s: EntryState) -> dict[str, bool | None]:
    return {"synced_deleted": None if s.synced is None else s.synced.deleted,
            "local_deleted": None if s.local is None else s.local.deleted}


_StateRow = namedtuple("_StateRow", (  # what _state reads, by name
    "id", "synced", "synced_version", "local", "local_version", "file_hash", "file_size",
    "file_mtime_ns", "held", "file_base", "shown_hash", "shown_marker"))
_STATE_COLS = _StateRow._fields
_GET_STATE = f"SELECT {', '.join(_STATE_COLS)} FROM entries WHERE id = ?"
_UPDATE_STATE = ("UPDATE entries SET synced = ?, synced_version = ?, local = ?,"
                 " local_version = ?, file_hash = ?, file_size = ?, file_mtime_ns = ?,"
                 " held = ?, file_base = ?, synced_deleted = ?, local_deleted = ?,"
                 " shown_hash = ?, shown_marker = ? WHERE id = ?")


def get_state_txn(conn: Conn, entry_id: str) -> EntryState:
    r = _one(conn, _GET_STATE, (entry_id,))
    return EntryState(entry_id, None, None) if r is None else _state(_StateRow(*r))


def put_state_txn(conn: Conn, s: EntryState) -> None:
    if (s.synced is None and s.local is None and s.file_hash is None
            and s.shown_hash is None):
        _run(conn, "DELETE FROM entries WHERE id = ?", (s.id,))
        return
    synced, local, base = _texts(s)
    d = _deleted(s)
    values = (synced, version_of(s.synced), local, version_of(s.local), s.file_hash,
              s.file_size, s.file_mtime_ns, s.held, base, d["synced_deleted"],
              d["local_deleted"], s.shown_hash, s.shown_marker)
    if _run(conn, _UPDATE_STATE, (*values, s.id)) == 0:
        _run(conn, _INSERT, (s.id, *values))


def outbox_txn(conn: Conn) -> list[dict[str, Any]]:
    return [{"batch_id": r[0], "body": json.loads(r[1]), "created_at": r[2]}
            for r in _rows(conn, "SELECT batch_id, body, created_at FROM outbox"
                                 " ORDER BY created_at")]


def add_outbox_txn(conn: Conn, batch_id: str, body: dict[str, Any], now: int) -> None:
    _run(conn, "INSERT INTO outbox (batch_id, body, created_at) VALUES (?, ?, ?)",
         (batch_id, json.dumps(body), now))


def drop_outbox_txn(conn: Conn, batch_id: str) -> None:
    _run(conn, "DELETE FROM outbox WHERE batch_id = ?", (batch_id,))


def add_history_txn(conn: Conn, *, epoch: str, seq: int, head: str, kind: str,
                    entries: list[str], batch_id: str | None = None,
                    replica_id: str | None = None, batch_digest: str | None = None,
                    author: dict[str, Any] | None = None, accepted_at: int | None = None,
                    detail: dict[str, Any] | None = None) -> None:
    _run(conn, "INSERT INTO history (epoch, seq, head, kind, entries, batch_id, replica_id,"
               " batch_digest, author, accepted_at, detail)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
         (epoch, seq, head, kind, json.dumps(entries), batch_id, replica_id, batch_digest,
          None if author is None else json.dumps(author), accepted_at,
          None if detail is None else json.dumps(detail)))


def history_page_txn(conn: Conn, *, before_n: int | None = None, limit: int = 200
                     ) -> list[dict[str, Any]]:
    """History rows newest first (``n`` below ``before_n``), JSON columns decoded."""
    sql = "SELECT * FROM history" + (" WHERE n < ?" if before_n is not None else "")
    rows = conn.execute(sql + " ORDER BY n DESC LIMIT ?",
                        ((before_n,) if before_n is not None else ()) + (limit,))
    out = []
    for r in rows:
        d = r._asdict()
        for col in ("entries", "author", "detail"):
            d[col] = json.loads(d[col]) if d.get(col) else None
        out.append(d)
    return out


def save_receipt_txn(conn: Conn, batch_id: str, receipt: dict[str, Any]) -> None:
    _run(conn, "INSERT OR REPLACE INTO receipts (batch_id, receipt) VALUES (?, ?)",
         (batch_id, json.dumps(receipt)))


def _conflict(r: Any) -> Conflict:
    return Conflict(r.entry_id, json.loads(r.fields), entry_from_json(r.base),
                    entry_from_json(r.ours), entry_from_json(r.theirs),
                    None if r.theirs_author is None else json.loads(r.theirs_author),
                    r.theirs_seq, r.body_with_markers, r.created_at)


def get_conflict_txn(conn: Conn, entry_id: str) -> Conflict | None:
    r = conn.execute("SELECT * FROM conflicts WHERE entry_id = ?", (entry_id,)).fetchone()
    return None if r is None else _conflict(r)


def put_conflict_txn(conn: Conn, c: Conflict) -> None:
    _run(conn, "INSERT OR REPLACE INTO conflicts (entry_id, fields, base, ours, theirs,"
               " base_version, ours_version, theirs_version, theirs_author, theirs_seq,"
               " body_with_markers, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
         (c.entry_id, json.dumps(c.fields), entry_json(c.base), entry_json(c.ours),
          entry_json(c.theirs), version_of(c.base), version_of(c.ours), version_of(c.theirs),
          None if c.theirs_author is None else json.dumps(c.theirs_author), c.theirs_seq,
          c.body_with_markers, c.created_at))


def drop_conflict_txn(conn: Conn, entry_id: str) -> None:
    _run(conn, "DELETE FROM conflicts WHERE entry_id = ?", (entry_id,))


def add_vault_write_txn(conn: Conn, entry_id: str, content: str | None,
                        prev_hash: str | None) -> None:
    """Journal a vault write. ``prev_hash`` is what the file holds now; when a write is
    already pending, the file still holds what *that* write expected, so keep its hash."""
    # one statement: a pending row keeps its prev_hash and takes the new content
    _run(conn, "INSERT INTO vault_pending (entry_id, content, prev_hash) VALUES (?, ?, ?)"
               " ON CONFLICT (entry_id) DO UPDATE SET content = excluded.content",
         (entry_id, content, prev_hash))


def done_vault_write_txn(conn: Conn, entry_id: str) -> None:
    _run(conn, "DELETE FROM vault_pending WHERE entry_id = ?", (entry_id,))
