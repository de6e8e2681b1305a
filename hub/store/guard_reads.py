"""The guard's reads as single statements (hub/guard.py): what its preparing read
transaction looks up, and what its committing transaction re-reads under the space lock.
Each is one round trip on PostgreSQL instead of five or seven; the guard applies its
checks to the one row in the order it always did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hub.store.batches import PriorBatch
from hub.store.principals import DEVICE_BY_ID_SQL, DeviceRow, ReplicaRow
from hub.store.spaces_sql import SPACE_COLS, SpaceRow
from hub.store.sql import Read, Sql

# ---------------------------------------------------------------- the preparing reads
#
# The preparing read transaction's single-row reads in ONE statement: the device and its
# user, the space the path names (by id or name), the user's role there, the replay check
# and the replica. The guard checks them in its usual order (authentication first).

# ``device_by_id_txn``'s statement, its columns named for the outer SELECT
_CTX_DEVICE = DEVICE_BY_ID_SQL.replace("u.name FROM", "u.name AS user_name FROM")


_PREPARE = Sql(
    "SELECT dv.id, dv.user_id, dv.name, dv.public_key, dv.revoked_at, dv.active, dv.is_owner,"
    " dv.user_name, "
    f"{', '.join('sp.' + c.strip() for c in SPACE_COLS.split(','))}, m.role, "
    "pb.space_id, pb.digest, pb.receipt, "
    "r.id, r.space_id, r.device_id, r.name, r.created_at, r.revoked_at "
    "FROM (SELECT 1 AS one) o "
    f"LEFT JOIN ({_CTX_DEVICE}) dv "
    "ON 1 = 1 "
    f"LEFT JOIN (SELECT {SPACE_COLS} FROM spaces WHERE id = :ref OR name = :ref "
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


_SP = 8 + len(SPACE_COLS.split(","))  # the column after the space's


def prepare_context_of(r: Any, user_id: str) -> PrepareContext:
    dev = None if r[0] is None else DeviceRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]),
                                              bool(r[6]), r[7])
    return PrepareContext(
        user_id=user_id, device=dev, space=None if r[8] is None else SpaceRow(*r[8:_SP]),
        role=r[_SP], prior=None if r[_SP + 1] is None else PriorBatch(*r[_SP + 1:_SP + 4]),
        replica=None if r[_SP + 4] is None else ReplicaRow(*r[_SP + 4:_SP + 10]))


# ---------------------------------------------------------------- the commit-time reads
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


# ---------------------------------------------------------------- guardrail key holders
#
# The live guardrails that hold a key, found by its digest (``entries.key_digest``, the
# partial index ``ix_entries_key_digest``: an index seek per key, never a scan of the
# space's guardrails). Read only for a batch that puts a guardrail taking a key: while
# preparing, and again by the committing transaction under the space lock (hub/guard.py).
# At most ``KEY_HOLDERS`` + 1 rows per key: one more tells the guard there are more.

KEY_HOLDERS = 64
_HOLDERS = Sql("SELECT entry_id, content FROM entries WHERE space_id = :s "
               "AND key_digest = :k ORDER BY entry_id LIMIT :n")


def key_holders_reads(space_id: str, digests: list[str]) -> list[Read]:
    """The statements of ``key_holders_txn``, one per key digest."""
    return [(_HOLDERS, {"s": space_id, "k": d, "n": KEY_HOLDERS + 1}) for d in digests]


def key_holders_of(results: list[list[Any]]) -> list[list[tuple[str, str]]]:
    """Per key digest, in order: its holders' ``(entry_id, content)``."""
    return [[(eid, content) for eid, content in rows] for rows in results]


def key_holders_txn(conn: Any, space_id: str, digests: list[str]
                    ) -> list[list[tuple[str, str]]]:
    """Per key digest, the live guardrails that hold it: ``(entry_id, canonical content)``."""
    return key_holders_of([stmt.all(conn, params)
                           for stmt, params in key_holders_reads(space_id, digests)])


_GUARDRAILS: dict[int, Sql] = {}


def guardrail_contents_txn(conn: Any, space_id: str, entry_ids: list[str]) -> dict[str, str]:
    """``entry_id -> canonical content`` of the given entries that are live guardrails (a
    row with a key digest: hub/policy.py ``key_digest_of``), whatever their path: what the
    typed rules compare a put or a delete with (the effective kind, shared/kinds.py, of the
    version it replaces)."""
    out: dict[str, str] = {}
    for i in range(0, len(entry_ids), 500):
        part = entry_ids[i:i + 500]
        stmt = _GUARDRAILS.get(len(part))
        if stmt is None:
            marks = ", ".join(f":e{j}" for j in range(len(part)))
            stmt = _GUARDRAILS[len(part)] = Sql(
                "SELECT entry_id, content FROM entries WHERE space_id = :s AND deleted = false "
                f"AND key_digest IS NOT NULL AND entry_id IN ({marks})")
        params: dict[str, Any] = {f"e{j}": eid for j, eid in enumerate(part)}
        params["s"] = space_id
        out.update((eid, c) for eid, c in stmt.all(conn, params))
    return out
