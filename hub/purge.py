"""Purge: remove some entries' content from all of a space's history (docs/security.md, Purge).

    POST /v1/spaces/{space}/purge {entries, reason[, dry_run]}      admins, never delegated
      │ one write transaction, under the space lock:
      ├─ find every copy: the current row, every batch of every epoch with an op on it
      │    (dry run: stop here and answer entries, batches touched, replicas affected)
      ├─ state root: the live purged entries leave the lattice (signed_state.advance_txn)
      ├─ rows: entries + read index deleted; batch bodies rewritten without the ops;
      │    the blobs (attachments' bytes) only their versions named deleted (hub/blobs.py)
      ├─ a new epoch (head at seq 0) and its signed statement: reason + purged ids
      ├─ quota usage counted again
      └─ audit event "purge": the ids, the reason, the epochs; never content
      then, committed: compact the database (hub/store/purge_sql.compact: SQLite VACUUM and
      wal_checkpoint(TRUNCATE), PostgreSQL VACUUM FULL) so the bytes leave the files

Why a new epoch: every replica then takes a snapshot, which no longer lists the entries,
and the signed statement tells it which entries to drop from its own store, vault, conflicts
and outbox (replica/engine/purge.py); an unpublished local edit of one is held, never republished.
Why bodies are rewritten rather than batches deleted: the other entries' history (reads at a
seq, revert plans) stays; an old epoch's batches are never served for verification, so a
body that no longer matches its digest misleads nobody (docs/security.md, Purge).
"""

from __future__ import annotations

import json
from typing import Any

from hub import audit, blobs, signed_state
from hub.access import Principal, space_access_txn
from hub.keys import HubKey
from hub.quotas import recount_txn
from hub.store import purge_sql as ps
from hub.store import read_index as ri
from hub.store.batches import current_contents_txn
from hub.store.db import Store
from hub.store.principals import list_replicas_txn
from hub.store.spaces_sql import set_head_txn
from shared.digest import genesis_digest
from shared.errors import Forbidden, InvalidRequest, NotFound
from shared.ids import is_entry_id, new_id
from shared.signed import MAX_PURGED
from shared.state import Change
from shared.wire import op_entry_id

BATCHES_LISTED = 1000  # batches named in the answer (all are counted)


def _entries(body: dict[str, Any]) -> list[str]:
    ids = body.get("entries")
    if not (isinstance(ids, list) and 0 < len(ids) <= MAX_PURGED
            and all(isinstance(e, str) and is_entry_id(e) for e in ids)):
        raise InvalidRequest(f"entries: a list of 1-{MAX_PURGED} entry ids",
                             {"field": "entries"})
    return sorted(set(ids))


def _reason(body: dict[str, Any]) -> str:
    reason = body.get("reason")
    if not (isinstance(reason, str) and 0 < len(reason.strip()) <= 500):
        raise InvalidRequest("reason is required (1-500 characters): say why the content "
                             "goes", {"field": "reason"})
    return reason


def _live(row: tuple[str, bool] | None) -> str | None:
    """The live version of a current-state row (None: absent or a tombstone)."""
    return row[0] if row is not None and not row[1] else None


def purge(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int,
          key: HubKey | None) -> dict[str, Any]:
    """Purge (or, with ``dry_run``, preview) ``body["entries"]``; see the module doc."""
    ids, reason = _entries(body), _reason(body)
    dry = body.get("dry_run", False)
    if not isinstance(dry, bool):
        raise InvalidRequest("dry_run must be true or false", {"field": "dry_run"})
    if p.delegation_id is not None:
        raise Forbidden("delegated credentials cannot purge")

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        ri.lock_state_txn(conn, space.id)  # the read indexer waits: it re-reads after us
        current = {e: ps.entry_txn(conn, space.id, e) for e in ids}
        touched = list(ps.touching_batches_txn(conn, space.id, set(ids)))
        unknown = [e for e in ids if current[e] is None
                   and not any(e in {op_entry_id(o) for o in b["ops"]}
                               for _e, _n, b in touched)]
        if unknown:
            raise NotFound("no such entries in this space's history", {"entries": unknown})
        replicas = [{"id": r["id"], "name": r["name"], "device_name": r["device_name"],
                     "user_id": r["user_id"]}
                    for r in list_replicas_txn(conn, space.id) if r["revoked_at"] is None]
        out: dict[str, Any] = {
            "space": space.id, "epoch": None, "previous": space.epoch,
            "previous_seq": space.head_seq, "reason": reason, "dry_run": dry,
            "entries": [{"id": e, "live": _live(current[e]) is not None} for e in ids],
            "batches_touched": len(touched),
            "batches": [{"epoch": e, "seq": n} for e, n, _b in touched[:BATCHES_LISTED]],
            "replicas_affected": replicas}
        if dry:
            return out
        # the attachments' bytes any version of them named (decided after the rewrite)
        named = blobs.hashes_in(op for _e, _n, b in touched for op in b.get("ops", [])
                                if op_entry_id(op) in set(ids))
        named |= blobs.hashes_in(json.loads(c) for c in current_contents_txn(
            conn, space.id, [e for e, c in current.items() if c is not None]).values())
        live: list[Change] = [(e, _live(c), None) for e, c in current.items()
                              if _live(c) is not None]
        if live:
            signed_state.advance_txn(conn, space.id, live)
        for e in ids:
            ps.delete_entry_txn(conn, space.id, e)
        for epoch, seq, b in touched:
            ps.set_body_txn(conn, space.id, epoch, seq, ps.scrub_body(b, set(ids)))
        out["blobs_removed"] = len(blobs.drop_unnamed_txn(conn, space.id, named))
        ps.optimize_search_txn(conn)
        epoch = new_id(now)
        set_head_txn(conn, space.id, 0, genesis_digest(space.id, epoch), epoch=epoch)
        if key is not None:
            signed_state.epoch_statement_txn(conn, key, space, epoch, reason, now, purged=ids)
        recount_txn(conn, space.id, history=True)
        audit.record_space_txn(conn, space, at=now, action="purge", actor=p.actor(),
                               details={"entries": ids, "reason": reason,
                                        "previous": space.epoch, "epoch": epoch,
                                        "previous_seq": space.head_seq,
                                        "batches_touched": len(touched)})
        return dict(out, epoch=epoch)

    out = store.run_write(txn)
    if not dry:
        out["storage"] = ps.compact(store.engine)
    return out
