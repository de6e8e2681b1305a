"""Blocked versions, the hub's half of ``quire admin revert --block`` (docs/security.md,
"Revert and blocked versions").

    POST /v1/spaces/{space}/blocks   block()   space admins, audited ``version.block``
         {"seq": N, "versions": [{"id": ENTRY, "version": SHA256}, …], "dry_run": bool}
    GET  /v1/spaces/{space}/blocks   list_blocks()   members
    guard.prepare_txn ─> check_txn(conn, space, ops)
         an op whose entry version (the SHA-256 of its content) is blocked for that entry
         └─ VersionBlocked (``version_blocked``, every such op in the details); nothing is
            written. A replica that tries to publish it holds the edit as a conflict
            (replica/engine/push.py).

A block names one entry id and one exact version: the same content under another id, or
any other version of the entry (the revert's own, a later fix), publishes as before. Blocks
only refuse, so reading them in the preparing transaction is enough: a batch prepared just
before a block commits is let through as it would have been a moment earlier, and the
revert that precedes a block has already moved the entry off that version (a batch based on
it is refused with ``base_mismatch``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hub import audit
from hub.access import Principal, space_access_txn
from hub.admin import direct
from hub.store.blocks_sql import (
    blocked_pairs_txn,
    blocked_read,
    blocked_txn,
    insert_blocks_txn,
    list_blocks_txn,
)
from hub.store.db import Store
from hub.store.sql import Read
from shared.errors import InvalidRequest, VersionBlocked
from shared.ids import is_entry_id

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
MAX_VERSIONS = 100  # a request's (a small body); the CLI sends a larger revert in parts
MAX_LISTED = 1000


def _row(r: Any) -> dict[str, Any]:
    return {"id": r.entry_id, "version": r.version, "seq": r.seq,
            "created_by": r.created_by, "created_at": r.created_at}


def _written(ops: Sequence[Any]) -> list[str]:
    """The entries whose blocked versions matter: those the batch writes (not deletes)."""
    return sorted({op.entry_id for op in ops if not op.entry.deleted})


def check_read(space_id: str, ops: Sequence[Any]) -> Read | None:
    """The look-up ``check_txn`` makes (None: nothing to look up), for a caller that reads
    it together with others (``read_together``, hub/store/sql.py) and then calls
    ``check_rows``."""
    ids = _written(ops)
    return blocked_read(space_id, ids) if ids else None


def check_txn(conn: Any, space_id: str, ops: Sequence[Any]) -> None:
    """Refuse the batch when an op writes a blocked version of its entry."""
    ids = _written(ops)
    if ids:
        check_rows(ops, blocked_txn(conn, space_id, ids))


def check_rows(ops: Sequence[Any], rows: list[Any]) -> None:
    """``check_txn`` on the rows of its look-up."""
    if not rows:
        return
    blocked = {(entry_id, version): seq for entry_id, version, seq in rows}
    hits = [{"op": i, "id": op.entry_id, "version": op.entry.version,
             "seq": blocked[(op.entry_id, op.entry.version)]}
            for i, op in enumerate(ops) if (op.entry_id, op.entry.version) in blocked]
    if hits:
        h = hits[0]
        raise VersionBlocked(
            f"{len(hits)} op(s) write a version an admin reverted and blocked ({h['id']}, "
            f"reverted from seq {h['seq']}); the whole batch was refused", {"blocked": hits})


def parse_block(body: dict[str, Any]) -> tuple[int, list[tuple[str, str]]]:
    seq, versions = body.get("seq"), body.get("versions")
    if not (isinstance(seq, int) and not isinstance(seq, bool) and seq >= 1):
        raise InvalidRequest("seq must be the seq of the reverted batch (>= 1)",
                             {"field": "seq"})
    if not (isinstance(versions, list) and 0 < len(versions) <= MAX_VERSIONS):
        raise InvalidRequest(f"versions must list 1-{MAX_VERSIONS} entry versions",
                             {"field": "versions"})
    out = []
    for v in versions:
        eid = v.get("id") if isinstance(v, dict) else None
        ver = v.get("version") if isinstance(v, dict) else None
        if not (isinstance(eid, str) and is_entry_id(eid) and isinstance(ver, str)
                and _HEX64.match(ver) and set(v) <= {"id", "version"}):
            raise InvalidRequest("each version is {id: entry id, version: 64 hex digits}",
                                 {"field": "versions"})
        out.append((eid, ver))
    return seq, sorted(set(out))


def block(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int,
          *, dry_run: bool = False) -> dict[str, Any]:
    """Block entry versions from being published again (space admins); audited as
    ``version.block`` with the ids, versions and seq. Blocking a blocked version answers
    it as ``created: false``. ``dry_run``: every check runs, nothing is written."""
    direct(p)
    seq, versions = parse_block(body)
    dry_run = dry_run or body.get("dry_run") is True

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        if seq > space.head_seq:
            raise InvalidRequest("seq is beyond the space's head", {"field": "seq"})
        prior = blocked_pairs_txn(conn, space.id, sorted({e for e, _ in versions}))
        new = [(e, v) for e, v in versions if (e, v) not in prior]
        listed = [{"id": e, "version": v, "created": (e, v) in new} for e, v in versions]
        if dry_run or not new:
            return {"space": space.id, "seq": seq, "blocked": listed, "dry_run": dry_run}
        insert_blocks_txn(conn, [{"space_id": space.id, "entry_id": e, "version": v,
                                  "seq": seq, "created_by": p.user_id, "created_at": now}
                                 for e, v in new])
        audit.record_space_txn(conn, space, at=now, action="version.block", actor=p.actor(),
                               details={"seq": seq, "versions": [
                                   {"id": e, "version": v} for e, v in new]})
        return {"space": space.id, "seq": seq, "blocked": listed, "dry_run": False}

    return store.run_write(txn)


def list_blocks(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    """A space's blocked versions, newest first (members)."""
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        rows = list_blocks_txn(conn, space.id, MAX_LISTED)
    return {"space": space.id, "blocks": [_row(r) for r in rows]}
