"""SQL for the hub. Functions ending in ``_txn`` must run inside a transaction opened by
``Store.read`` or ``Store.run_write`` and take its connection as first argument."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from hub.store.schema import (
    audit,
    batches,
    delegations,
    device_codes,
    devices,
    entries,
    hub_keys,
    hub_state,
    invites,
    members,
    refresh_tokens,
    replicas,
    rules,
    spaces,
    users,
)

# ---------------------------------------------------------------- plain SQL for the hot path
#
# The publication path runs ~15 statements per batch. Built with SQLAlchemy Core each costs
# more in expression building, cache-key generation and result processing than in the
# database, so those statements are written once as SQL with ``:name`` parameters, rendered
# for the driver's paramstyle once, and run on the transaction's DBAPI cursor (the same
# connection and transaction SQLAlchemy opened). Rows come back as plain tuples.


class Sql:
    __slots__ = ("sqlite", "pg")

    def __init__(self, sql: str):
        self.sqlite = sql  # sqlite3: named parameters as written
        self.pg = re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)  # psycopg: pyformat

    def cursor(self, conn: Connection, params: dict[str, Any]) -> Any:
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        sql = self.pg if conn.dialect.name == "postgresql" else self.sqlite
        try:
            cur.execute(sql, params)
        except conn.dialect.loaded_dbapi.Error as e:
            cur.close()
            raise _wrapped(conn, sql, params, e) from e
        return cur

    def one(self, conn: Connection, params: dict[str, Any]) -> Any:
        cur = self.cursor(conn, params)
        try:
            return cur.fetchone()
        finally:
            cur.close()

    def all(self, conn: Connection, params: dict[str, Any]) -> list[Any]:
        cur = self.cursor(conn, params)
        try:
            return cur.fetchall()
        finally:
            cur.close()

    def run(self, conn: Connection, params: dict[str, Any]) -> int:
        cur = self.cursor(conn, params)
        try:
            return int(cur.rowcount)
        finally:
            cur.close()


def _wrapped(conn: Connection, sql: str, params: Any, e: Exception) -> Exception:
    """A driver error as SQLAlchemy would raise it (``Store.run_write`` retries busy SQLite,
    serialization failures and deadlocks by those classes)."""
    return DBAPIError.instance(sql, params, e, conn.dialect.loaded_dbapi.Error,
                               dialect=conn.dialect)


_SPACE_COLS = ("id, name, epoch, head_seq, head_digest, rules_version, audit_seq, audit_digest,"
               " deleted_at")
_GET_SPACE = Sql(f"SELECT {_SPACE_COLS} FROM spaces WHERE id = :id")
_GET_SPACE_LOCKED = {"sqlite": _GET_SPACE,  # BEGIN IMMEDIATE already serializes writers
                     "postgresql": Sql(f"SELECT {_SPACE_COLS} FROM spaces WHERE id = :id "
                                       "FOR UPDATE")}
_FIND_SPACE = Sql(f"SELECT {_SPACE_COLS} FROM spaces WHERE id = :ref OR name = :ref")


@dataclass(frozen=True)
class SpaceRow:
    id: str
    name: str
    epoch: str
    head_seq: int
    head_digest: str
    rules_version: int
    audit_seq: int
    audit_digest: str
    deleted_at: int | None = None  # soft-deleted (hub/space_delete.py)


def _space(row: Any) -> SpaceRow | None:
    if row is None:
        return None
    return SpaceRow(row.id, row.name, row.epoch, row.head_seq, row.head_digest,
                    row.rules_version, row.audit_seq, row.audit_digest,
                    getattr(row, "deleted_at", None))


def _space_t(row: Any) -> SpaceRow | None:
    return None if row is None else SpaceRow(*row)


def get_space_txn(conn: Connection, space_id: str, *, lock: bool = False) -> SpaceRow | None:
    stmt = _GET_SPACE_LOCKED.get(conn.dialect.name, _GET_SPACE) if lock else _GET_SPACE
    return _space_t(stmt.one(conn, {"id": space_id}))


def deleted_statement_txn(conn: Connection, space_id: str) -> str | None:
    """The hub-signed deletion statement of a deleted space (canonical JSON), else None."""
    return conn.execute(select(spaces.c.deleted_statement).where(
        spaces.c.id == space_id)).scalar()


def find_space_txn(conn: Connection, ref: str) -> SpaceRow | None:
    """A space by id or by name."""
    return _space_t(_FIND_SPACE.one(conn, {"ref": ref}))


def list_spaces_txn(conn: Connection, user_id: str | None) -> list[dict[str, Any]]:
    """Spaces of a user with their role; ``user_id=None`` lists all (for owners)."""
    if user_id is None:
        rows = conn.execute(select(spaces).order_by(spaces.c.name)).all()
        return [{"id": r.id, "name": r.name, "epoch": r.epoch, "seq": r.head_seq, "role": None}
                for r in rows]
    rows = conn.execute(
        select(spaces, members.c.role).join(members, members.c.space_id == spaces.c.id)
        .where(members.c.user_id == user_id).order_by(spaces.c.name)).all()
    return [{"id": r.id, "name": r.name, "epoch": r.epoch, "seq": r.head_seq, "role": r.role}
            for r in rows]


def insert_space_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(spaces).values(**values))


_ADVANCE = Sql("UPDATE spaces SET head_seq = :seq, head_digest = :digest, audit_seq = :an, "
               "audit_digest = :ad WHERE id = :id")


def advance_head_and_audit_txn(conn: Connection, space_id: str, seq: int, digest: str,
                               audit_tip: tuple[int, str]) -> None:
    """A publication's one update of the space row: the new head and the audit chain tip."""
    _ADVANCE.run(conn, {"seq": seq, "digest": digest, "an": audit_tip[0], "ad": audit_tip[1],
                        "id": space_id})


def set_head_txn(conn: Connection, space_id: str, seq: int, digest: str,
                 epoch: str | None = None) -> None:
    values: dict[str, Any] = {"head_seq": seq, "head_digest": digest}
    if epoch is not None:
        values["epoch"] = epoch
    conn.execute(update(spaces).where(spaces.c.id == space_id).values(**values))


def bump_rules_version_txn(conn: Connection, space_id: str) -> None:
    conn.execute(update(spaces).where(spaces.c.id == space_id)
                 .values(rules_version=spaces.c.rules_version + 1))


# ---------------------------------------------------------------- principals


@dataclass(frozen=True)
class DeviceRow:
    id: str
    user_id: str
    name: str
    public_key: str
    revoked_at: int | None
    user_active: bool
    is_owner: bool
    user_name: str


def device_by_token_hash_txn(conn: Connection, token_hash: str) -> DeviceRow | None:
    row = conn.execute(
        select(devices, users.c.active, users.c.is_owner, users.c.name.label("user_name"))
        .join(users, users.c.id == devices.c.user_id)
        .where(devices.c.token_hash == token_hash)).first()
    return _device(row)


_DEVICE_BY_ID_SQL = ("SELECT d.id, d.user_id, d.name, d.public_key, d.revoked_at, u.active, "
                     "u.is_owner, u.name FROM devices d JOIN users u ON u.id = d.user_id "
                     "WHERE d.id = :id")
_DEVICE_BY_ID = Sql(_DEVICE_BY_ID_SQL)
_DEVICE_BY_ID_LOCKED = {"sqlite": _DEVICE_BY_ID,  # BEGIN IMMEDIATE already serializes writers
                        "postgresql": Sql(_DEVICE_BY_ID_SQL + " FOR SHARE OF d, u")}


def device_by_id_txn(conn: Connection, device_id: str, *, lock: bool = False
                     ) -> DeviceRow | None:
    """``lock``: hold the device and user rows until commit (PostgreSQL ``FOR SHARE``): a
    revocation or deactivation (an UPDATE of either row) then waits for this transaction."""
    stmt = _DEVICE_BY_ID_LOCKED.get(conn.dialect.name, _DEVICE_BY_ID) if lock else _DEVICE_BY_ID
    r = stmt.one(conn, {"id": device_id})
    if r is None:
        return None
    return DeviceRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6]), r[7])


def _device(row: Any) -> DeviceRow | None:
    if row is None:
        return None
    return DeviceRow(row.id, row.user_id, row.name, row.public_key, row.revoked_at,
                     bool(row.active), bool(row.is_owner), row.user_name)


def insert_user_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(users).values(**values))


def insert_device_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(devices).values(**values))


def set_owner_txn(conn: Connection, user_id: str) -> None:
    conn.execute(update(users).where(users.c.id == user_id).values(is_owner=True))


def set_user_name_txn(conn: Connection, user_id: str, name: str) -> None:
    conn.execute(update(users).where(users.c.id == user_id).values(name=name))


_ADMIN_OVER = Sql("SELECT 1 FROM members a JOIN members m ON m.space_id = a.space_id "
                  "WHERE a.user_id = :a AND a.role = 'admin' AND m.user_id = :u LIMIT 1")


def admin_over_txn(conn: Connection, admin_id: str, user_id: str) -> bool:
    """Is ``admin_id`` an admin of a space ``user_id`` is a member of?"""
    return _ADMIN_OVER.one(conn, {"a": admin_id, "u": user_id}) is not None


_ROLE = Sql("SELECT role FROM members WHERE space_id = :s AND user_id = :u")


def role_txn(conn: Connection, space_id: str, user_id: str) -> str | None:
    r = _ROLE.one(conn, {"s": space_id, "u": user_id})
    return None if r is None else r[0]


def set_member_txn(conn: Connection, space_id: str, user_id: str, role: str, now: int) -> None:
    current = role_txn(conn, space_id, user_id)
    if current is None:
        conn.execute(insert(members).values(space_id=space_id, user_id=user_id, role=role,
                                            created_at=now))
    else:
        conn.execute(update(members).where(and_(members.c.space_id == space_id,
                                                members.c.user_id == user_id)).values(role=role))


def remove_member_txn(conn: Connection, space_id: str, user_id: str) -> int:
    return conn.execute(members.delete().where(and_(members.c.space_id == space_id,
                                                    members.c.user_id == user_id))).rowcount


def list_members_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(members.c.user_id, members.c.role, users.c.name, users.c.active)
        .join(users, users.c.id == members.c.user_id)
        .where(members.c.space_id == space_id).order_by(users.c.name)).all()
    return [{"user_id": r.user_id, "name": r.name, "role": r.role, "active": bool(r.active)}
            for r in rows]


class ReplicaRow(NamedTuple):
    id: str
    space_id: str
    device_id: str
    name: str
    created_at: int
    revoked_at: int | None


_REPLICA = Sql("SELECT id, space_id, device_id, name, created_at, revoked_at FROM replicas "
               "WHERE id = :id")


def get_replica_txn(conn: Connection, replica_id: str) -> ReplicaRow | None:
    r = _REPLICA.one(conn, {"id": replica_id})
    return None if r is None else ReplicaRow(*r)


def insert_replica_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(replicas).values(**values))


# ---------------------------------------------------------------- invites


def invite_by_hash_txn(conn: Connection, code_hash: str) -> Any:
    return conn.execute(select(invites).where(invites.c.code_hash == code_hash)).first()


def insert_invite_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(invites).values(**values))


def use_invite_txn(conn: Connection, invite_id: str, user_id: str, now: int) -> bool:
    """Mark an invite used; False when another redemption got there first (single use)."""
    res = conn.execute(update(invites).where(and_(invites.c.id == invite_id,
                                                  invites.c.used_at.is_(None)))
                       .values(used_at=now, used_by=user_id))
    return res.rowcount == 1


# ---------------------------------------------------------------- entries and batches


_VERSIONS: dict[int, Sql] = {}


def _versions_sql(n: int) -> Sql:
    stmt = _VERSIONS.get(n)
    if stmt is None:
        marks = ", ".join(f":e{i}" for i in range(n))
        stmt = _VERSIONS[n] = Sql("SELECT entry_id, version, deleted FROM entries "
                                  f"WHERE space_id = :s AND entry_id IN ({marks})")
    return stmt


Read = tuple[Sql, dict[str, Any]]  # a statement and its parameters, for ``read_together``


def read_together(conn: Connection, reads: list[Read]) -> list[list[Any]]:
    """Run independent reads and return their rows, in order. PostgreSQL: all of them in
    one round trip (pipeline mode, ``pipelined``); SQLite: one after another."""
    curs: list[Any] = []
    try:
        with pipelined(conn):  # leaving the block is the one round trip (a Sync)
            for stmt, params in reads:
                curs.append(stmt.cursor(conn, params))
        # fetched after the block: a fetch inside would sync, then leaving syncs again
        return [cur.fetchall() for cur in curs]
    finally:
        for cur in curs:
            cur.close()


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
                    "epoch) VALUES (:space_id, :entry_id, :version, :deleted, :content, :seq, "
                    ":epoch)")
_UPDATE_ENTRY = Sql("UPDATE entries SET version = :version, deleted = :deleted, "
                    "content = :content, seq = :seq, epoch = :epoch "
                    "WHERE space_id = :space_id AND entry_id = :entry_id")


def upsert_entries_txn(conn: Connection, space_id: str, epoch: str, seq: int,
                       rows: list[dict[str, Any]], existing: set[str]) -> None:
    """Write new entry states; ``existing`` are the ids that already have a row."""
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
                    raise _wrapped(conn, sql, params, e) from e
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
    _INSERT_BATCH.run(conn, values)


# ---------------------------------------------------------------- the guard's preparing reads
#
# The preparing read transaction's single-row reads in ONE statement: the device and its
# user, the space the path names (by id or name), the user's role there, the replay check
# and the replica. The guard checks them in its usual order (authentication first).

# ``device_by_id_txn``'s statement, its columns named for the outer SELECT
_CTX_DEVICE = _DEVICE_BY_ID_SQL.replace("u.name FROM", "u.name AS user_name FROM")

_PREPARE = Sql(
    "SELECT dv.id, dv.user_id, dv.name, dv.public_key, dv.revoked_at, dv.active, dv.is_owner,"
    " dv.user_name, "
    f"{', '.join('sp.' + c.strip() for c in _SPACE_COLS.split(','))}, m.role, "
    "pb.space_id, pb.digest, pb.receipt, "
    "r.id, r.space_id, r.device_id, r.name, r.created_at, r.revoked_at "
    "FROM (SELECT 1 AS one) o "
    f"LEFT JOIN ({_CTX_DEVICE}) dv "
    "ON 1 = 1 "
    f"LEFT JOIN (SELECT {_SPACE_COLS} FROM spaces WHERE id = :ref OR name = :ref "
    "LIMIT 1) sp ON 1 = 1 "
    "LEFT JOIN members m ON m.space_id = sp.id AND m.user_id = :u "
    "LEFT JOIN (SELECT space_id, digest, receipt FROM batches "
    "WHERE replica_id = :rep AND batch_id = :bid) pb ON 1 = 1 "
    "LEFT JOIN (SELECT id, space_id, device_id, name, created_at, revoked_at "
    "FROM replicas WHERE id = :rep) r ON 1 = 1")


@dataclass(frozen=True)
class PrepareContext:
    user_id: str  # the user ``role`` was read for
    device: DeviceRow | None
    space: SpaceRow | None  # the space ``space_ref`` names
    role: str | None  # the user's membership role in it
    prior: PriorBatch | None  # this (replica, batch id) already accepted
    replica: ReplicaRow | None


def prepare_context_read(*, device_id: str, user_id: str, space_ref: str, replica_id: str,
                         batch_id: str) -> Read:
    """The guard's preparing reads as one statement (see above); its one row goes to
    ``prepare_context_of``."""
    return _PREPARE, {"id": device_id, "u": user_id, "ref": space_ref, "rep": replica_id,
                      "bid": batch_id}


def prepare_context_of(r: Any, user_id: str) -> PrepareContext:
    dev = None if r[0] is None else DeviceRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]),
                                              bool(r[6]), r[7])
    return PrepareContext(
        user_id=user_id, device=dev, space=None if r[8] is None else SpaceRow(*r[8:17]), role=r[17],
        prior=None if r[18] is None else PriorBatch(r[18], r[19], r[20]),
        replica=None if r[21] is None else ReplicaRow(*r[21:27]))


# ---------------------------------------------------------------- the guard's commit-time reads
#
# Everything the committing transaction re-reads after it locked the space row, in ONE
# statement (one round trip on PostgreSQL instead of seven): the replay check, the parent's
# head digest (rebase), the device and its user (locked FOR SHARE until commit on
# PostgreSQL, as ``device_by_id_txn(lock=True)``), the membership role, the replica, the
# quota row (FOR UPDATE, as ``quotas._usage_locked_txn``) and the kept state root. Each part
# is a single-row subquery joined to one constant row, so a missing row is NULLs, never no
# row. The guard applies its checks to the result in the order it always did.

_CTX_QUOTA = ("SELECT entries, bytes, history_bytes, max_entries, max_bytes, max_history_bytes "
              "FROM space_quota WHERE space_id = :s")


def _context_sql(dialect: str, quota: bool) -> str:
    pg = dialect == "postgresql"
    ctes = [f"dv AS ({_CTX_DEVICE}{' FOR SHARE OF d, u' if pg else ''})"]
    if quota:
        ctes.append(f"qt AS ({_CTX_QUOTA}{' FOR UPDATE' if pg else ''})")
    cols = ("dv.id, dv.user_id, dv.name, dv.public_key, dv.revoked_at, dv.active, dv.is_owner, "
            "dv.user_name, pb.space_id, pb.digest, pb.receipt, ha.head_digest, m.role, "
            "r.id, r.space_id, r.device_id, r.name, r.created_at, r.revoked_at, "
            "sr.digests, sr.root" + (", qt.entries, qt.bytes, qt.history_bytes, "
                                     "qt.max_entries, qt.max_bytes, qt.max_history_bytes"
                                     if quota else ""))
    return (f"WITH {', '.join(ctes)} SELECT {cols} FROM (SELECT 1 AS one) o "
            "LEFT JOIN dv ON 1 = 1 "
            "LEFT JOIN (SELECT space_id, digest, receipt FROM batches "
            "WHERE replica_id = :rep AND batch_id = :bid) pb ON 1 = 1 "
            "LEFT JOIN (SELECT head_digest FROM batches "
            "WHERE space_id = :s AND epoch = :e AND seq = :n) ha ON 1 = 1 "
            "LEFT JOIN (SELECT role FROM members WHERE space_id = :s AND user_id = :u) m "
            "ON 1 = 1 "
            "LEFT JOIN (SELECT id, space_id, device_id, name, created_at, revoked_at "
            "FROM replicas WHERE id = :rep) r ON 1 = 1 "
            "LEFT JOIN (SELECT digests, root FROM state_roots WHERE space_id = :s) sr ON 1 = 1"
            + (" LEFT JOIN qt ON 1 = 1" if quota else ""))


_CONTEXT = {(d, quota): Sql(_context_sql(d, quota))
            for d in ("sqlite", "postgresql") for quota in (False, True)}
QUOTA_COLS = ("entries", "bytes", "history_bytes", "max_entries", "max_bytes",
              "max_history_bytes")


@dataclass(frozen=True)
class CommitContext:
    device: DeviceRow | None
    prior: PriorBatch | None  # this (replica, batch id) already accepted
    parent_head: str | None  # the head digest after batch ``parent_seq`` of the epoch
    role: str | None  # the user's membership role
    replica: ReplicaRow | None
    root: tuple[bytes, str] | None  # the kept state: packed bucket digests, root
    quota: dict[str, Any] | None  # the space_quota row (None: none yet, or not asked)


def commit_context_read(dialect: str, *, space_id: str, epoch: str, parent_seq: int,
                        device_id: str, user_id: str, replica_id: str, batch_id: str,
                        quota: bool) -> Read:
    """The guard's commit-time re-reads as one statement (see above); ``quota``: also read
    and lock the space's quota row. Its one row goes to ``commit_context_of``."""
    return (_CONTEXT[(dialect, quota)], {
        "id": device_id, "s": space_id, "rep": replica_id, "bid": batch_id, "e": epoch,
        "n": parent_seq, "u": user_id})


def commit_context_of(r: Any, space_id: str, quota: bool) -> CommitContext:
    dev = None if r[0] is None else DeviceRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]),
                                              bool(r[6]), r[7])
    return CommitContext(
        device=dev,
        prior=None if r[8] is None else PriorBatch(r[8], r[9], r[10]),
        parent_head=r[11], role=r[12],
        replica=None if r[13] is None else ReplicaRow(*r[13:19]),
        root=None if r[19] is None else (bytes(r[19]), r[20]),
        quota=dict(zip(QUOTA_COLS, r[21:27], strict=True), space_id=space_id)
        if quota and r[21] is not None else None)


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


def count_live_entries_txn(conn: Connection, space_id: str) -> int:
    return int(conn.execute(select(func.count()).select_from(entries).where(
        (entries.c.space_id == space_id) & entries.c.deleted.is_(False))).scalar_one())


def count_rows_txn(conn: Connection) -> dict[str, int]:
    """Row counts of every table (tests compare them before and after bad input)."""
    out = {}
    for t in (users, devices, spaces, members, invites, replicas, batches, entries, audit,
              rules):
        out[t.name] = conn.execute(select(func.count()).select_from(t)).scalar_one()
    return out


# ---------------------------------------------------------------- audit


def hub_state_txn(conn: Connection, *, lock: bool = False) -> Any:
    q = select(hub_state).where(hub_state.c.id == 1)
    if lock:
        q = q.with_for_update()
    return conn.execute(q).first()


def set_hub_record_txn(conn: Connection, **values: Any) -> None:
    """Record ``public_url`` and/or ``key_id`` (hub/record.py)."""
    conn.execute(update(hub_state).where(hub_state.c.id == 1).values(**values))


def hub_key_statements_txn(conn: Connection) -> list[str]:
    """The hub key rotation statements (canonical JSON), oldest first (hub/keyrotation.py)."""
    return [r.statement for r in conn.execute(select(hub_keys).order_by(hub_keys.c.seq))]


def insert_hub_key_statement_txn(conn: Connection, *, seq: int, key_id: str,
                                 statement: str, at: int) -> None:
    conn.execute(insert(hub_keys).values(seq=seq, key_id=key_id, statement=statement, at=at))


def schema_revision_txn(conn: Connection) -> str | None:
    """The Alembic revision the database is at."""
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def insert_hub_state_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(hub_state).values(id=1, **values))


def advance_audit_tip_txn(conn: Connection, chain: str, n: int, digest: str) -> None:
    if chain == "hub":
        conn.execute(update(hub_state).where(hub_state.c.id == 1)
                     .values(audit_seq=n, audit_digest=digest))
    else:
        conn.execute(update(spaces).where(spaces.c.id == chain)
                     .values(audit_seq=n, audit_digest=digest))


_AUDIT_COLS = ("chain", "n", "at", "action", "actor", "details", "prev", "digest")
_INSERT_AUDIT = Sql(f"INSERT INTO audit ({', '.join(_AUDIT_COLS)}) "
                    f"VALUES ({', '.join(':' + c for c in _AUDIT_COLS)})")


def insert_audit_txn(conn: Connection, **values: Any) -> None:
    _INSERT_AUDIT.run(conn, values)


def iter_audit_txn(conn: Connection, since: int = 0, chain: str | None = None) -> Iterator[Any]:
    q = select(audit).where(audit.c.at >= since)
    if chain is not None:
        q = q.where(audit.c.chain == chain)
    yield from conn.execution_options(yield_per=500).execute(q.order_by(audit.c.chain,
                                                                        audit.c.n))


_RULES = Sql("SELECT id, effect, who, actions, entries FROM rules WHERE space_id = :s "
             "ORDER BY created_at, id")


def list_rules_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    return rules_of(_RULES.all(conn, {"s": space_id}))


def rules_read(space_id: str) -> Read:
    """The statement of ``list_rules_txn`` (its rows go to ``rules_of``)."""
    return _RULES, {"s": space_id}


def rules_of(rows: list[Any]) -> list[dict[str, Any]]:
    return [{"id": r[0], "effect": r[1], "who": r[2], "actions": r[3].split(","),
             "entries": r[4]} for r in rows]


# ---------------------------------------------------------------- identity (refresh tokens,
# delegations, device codes) and the admin listings


def insert_refresh_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(refresh_tokens).values(**values))


def refresh_by_hash_txn(conn: Connection, token_hash: str) -> Any:
    return conn.execute(select(refresh_tokens)
                        .where(refresh_tokens.c.token_hash == token_hash)).first()


def use_refresh_txn(conn: Connection, refresh_id: str, now: int) -> bool:
    """Mark a refresh credential used; False when another use got there first."""
    res = conn.execute(update(refresh_tokens).where(and_(refresh_tokens.c.id == refresh_id,
                                                         refresh_tokens.c.used_at.is_(None)))
                       .values(used_at=now))
    return res.rowcount == 1


def revoke_refresh_family_txn(conn: Connection, family_id: str, now: int) -> int:
    return conn.execute(update(refresh_tokens).where(and_(
        refresh_tokens.c.family_id == family_id, refresh_tokens.c.revoked_at.is_(None)))
        .values(revoked_at=now)).rowcount


def deactivate_user_txn(conn: Connection, user_id: str, now: int) -> int:
    """Deactivate a user and revoke the refresh credentials of all their devices."""
    n = conn.execute(update(users).where(and_(users.c.id == user_id, users.c.active.is_(True)))
                     .values(active=False)).rowcount
    conn.execute(update(refresh_tokens).where(and_(
        refresh_tokens.c.device_id.in_(select(devices.c.id).where(devices.c.user_id == user_id)),
        refresh_tokens.c.revoked_at.is_(None))).values(revoked_at=now))
    return n


def get_user_txn(conn: Connection, user_id: str) -> Any:
    return conn.execute(select(users).where(users.c.id == user_id)).first()


def revoke_device_refresh_txn(conn: Connection, device_id: str, now: int) -> int:
    return conn.execute(update(refresh_tokens).where(and_(
        refresh_tokens.c.device_id == device_id, refresh_tokens.c.revoked_at.is_(None)))
        .values(revoked_at=now)).rowcount


def insert_delegation_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(delegations).values(**values))


def get_delegation_txn(conn: Connection, delegation_id: str) -> Any:
    return conn.execute(select(delegations).where(delegations.c.id == delegation_id)).first()


def list_delegations_txn(conn: Connection, *, user_id: str | None = None,
                         space_id: str | None = None) -> list[dict[str, Any]]:
    q = select(delegations, spaces.c.name.label("space_name")).join(
        spaces, spaces.c.id == delegations.c.space_id)
    if user_id is not None:
        q = q.where(delegations.c.user_id == user_id)
    if space_id is not None:
        q = q.where(delegations.c.space_id == space_id)
    rows = conn.execute(q.order_by(delegations.c.created_at, delegations.c.id)).all()
    return [{"id": r.id, "user_id": r.user_id, "device_id": r.device_id, "space": r.space_id,
             "space_name": r.space_name, "agent": r.agent, "scope": r.scope,
             "created_at": r.created_at, "expires_at": r.expires_at,
             "revoked_at": r.revoked_at} for r in rows]


def revoke_delegation_txn(conn: Connection, delegation_id: str, now: int) -> int:
    return conn.execute(update(delegations).where(and_(delegations.c.id == delegation_id,
                                                       delegations.c.revoked_at.is_(None)))
                        .values(revoked_at=now)).rowcount


def insert_device_code_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(device_codes).values(**values))


def device_code_by_txn(conn: Connection, *, device_code_hash: str | None = None,
                       user_code_hash: str | None = None) -> Any:
    q = select(device_codes)
    if device_code_hash is not None:
        q = q.where(device_codes.c.device_code_hash == device_code_hash)
    else:
        q = q.where(device_codes.c.user_code_hash == user_code_hash)
    return conn.execute(q).first()


def approve_device_code_txn(conn: Connection, code_id: str, user_id: str, now: int) -> bool:
    res = conn.execute(update(device_codes).where(and_(device_codes.c.id == code_id,
                                                       device_codes.c.approved_at.is_(None)))
                       .values(approved_by=user_id, approved_at=now))
    return res.rowcount == 1


def use_device_code_txn(conn: Connection, code_id: str, device_id: str, now: int) -> bool:
    """Single use, enforced here: only the first token request for a code succeeds."""
    res = conn.execute(update(device_codes).where(and_(device_codes.c.id == code_id,
                                                       device_codes.c.used_at.is_(None)))
                       .values(used_at=now, device_id=device_id))
    return res.rowcount == 1


def list_devices_txn(conn: Connection, user_id: str | None) -> list[dict[str, Any]]:
    q = (select(devices.c.id, devices.c.name, devices.c.user_id, devices.c.created_at,
                devices.c.revoked_at, users.c.name.label("user_name"))
         .join(users, users.c.id == devices.c.user_id))
    if user_id is not None:
        q = q.where(devices.c.user_id == user_id)
    rows = conn.execute(q.order_by(devices.c.created_at, devices.c.id)).all()
    return [{"id": r.id, "name": r.name, "user_id": r.user_id, "user_name": r.user_name,
             "created_at": r.created_at, "revoked_at": r.revoked_at} for r in rows]


def revoke_device_txn(conn: Connection, device_id: str, now: int) -> int:
    return conn.execute(update(devices).where(and_(devices.c.id == device_id,
                                                   devices.c.revoked_at.is_(None)))
                        .values(revoked_at=now)).rowcount


def list_replicas_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(replicas.c.id, replicas.c.name, replicas.c.device_id, replicas.c.created_at,
               replicas.c.revoked_at, devices.c.name.label("device_name"), devices.c.user_id)
        .join(devices, devices.c.id == replicas.c.device_id)
        .where(replicas.c.space_id == space_id)
        .order_by(replicas.c.created_at, replicas.c.id)).all()
    return [{"id": r.id, "name": r.name, "device_id": r.device_id,
             "device_name": r.device_name, "user_id": r.user_id, "created_at": r.created_at,
             "revoked_at": r.revoked_at} for r in rows]


def revoke_replica_txn(conn: Connection, replica_id: str, now: int) -> int:
    return conn.execute(update(replicas).where(and_(replicas.c.id == replica_id,
                                                    replicas.c.revoked_at.is_(None)))
                        .values(revoked_at=now)).rowcount


def list_invites_txn(conn: Connection, space_id: str | None) -> list[dict[str, Any]]:
    q = select(invites)
    q = q.where(invites.c.space_id.is_(None) if space_id is None
                else invites.c.space_id == space_id)
    rows = conn.execute(q.order_by(invites.c.created_at, invites.c.id)).all()
    return [{"id": r.id, "space": r.space_id, "role": r.role, "created_by": r.created_by,
             "created_at": r.created_at, "expires_at": r.expires_at, "used_at": r.used_at,
             "used_by": r.used_by, "revoked_at": r.revoked_at} for r in rows]


def get_invite_txn(conn: Connection, invite_id: str) -> Any:
    return conn.execute(select(invites).where(invites.c.id == invite_id)).first()


def revoke_invite_txn(conn: Connection, invite_id: str, now: int) -> int:
    return conn.execute(update(invites).where(and_(invites.c.id == invite_id,
                                                   invites.c.revoked_at.is_(None),
                                                   invites.c.used_at.is_(None)))
                        .values(revoked_at=now)).rowcount


def insert_rule_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(rules).values(**values))


def delete_rule_txn(conn: Connection, space_id: str, rule_id: str) -> int:
    return conn.execute(rules.delete().where(and_(rules.c.space_id == space_id,
                                                  rules.c.id == rule_id))).rowcount


_NOTIFY = Sql("SELECT pg_notify(:channel, :payload)")


def notify_txn(conn: Connection, channel: str, payload: str) -> None:
    """PostgreSQL: queue a notification, delivered to every LISTENing process exactly when
    this transaction commits (and never if it rolls back). SQLite: nothing to do."""
    if conn.dialect.name == "postgresql":
        _NOTIFY.run(conn, {"channel": channel, "payload": payload})  # no answer awaited


@contextmanager
def pipelined(conn: Connection) -> Iterator[None]:
    """PostgreSQL: the block's statements on this connection go out in psycopg's pipeline
    mode: a statement whose answer is not read (a write through ``Sql.run``, whose rowcount
    is then unknown: -1) does not wait for it, so N writes cost one round trip; a read (``Sql.one``/``all``) still gets its
    answer, after everything queued before it. A statement that fails surfaces as the usual
    SQLAlchemy error (``Store.run_write`` retries serialization failures and deadlocks, the
    group commit rolls back to the item's savepoint), at the latest when the block ends;
    a refusal raised by Python inside the block wins over a failure of a queued write (the
    transaction is rolled back either way). SQLite: nothing to do (no round trips)."""
    if conn.dialect.name != "postgresql":
        yield
        return
    raw = conn.connection.dbapi_connection
    try:
        with raw.pipeline():  # type: ignore[union-attr]
            yield
    except conn.dialect.loaded_dbapi.Error as e:
        raise _wrapped(conn, "(pipelined statements)", None, e) from e
