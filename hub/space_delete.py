"""Deleting a space, softly, then for good (docs/operations.md, "Deleting a space").

    POST /v1/spaces/{space}/delete   delete()    hub owners; {"dry_run"}: the impact
         (members, live replicas, live entries, batches), nothing changed; else
         deleted_at + a hub-signed deletion statement (shared/signed.py) on the space row;
         audited ``space.delete`` (hub chain: it outlives the space's own)
    POST /v1/spaces/{space}/restore  restore()   hub owners; clears both: the space is as
         it was (nothing else was touched); audited ``space.restore``
    every other space endpoint ─> hub/access.py space_access_txn: ``space_deleted`` (410)
         for members, the statement in its details (a replica stops on it, verified; it
         never deletes anything); the guard re-checks under the space lock
    GET …/head?nonce=N ─> fresh_refusal(): the statement signed again over the caller's
         nonce, the only form a replica believes (a statement captured while the space was
         deleted, replayed after a restore, carries no nonce of the replica's: refused)
    purge_expired(store, now, retention_days)   ``quire hub gc`` and every hub start:
         each space deleted ``space_retention_days`` ago or more loses every row that
         names it (every table with a ``space_id`` column, its audit chain), then the
         space row; audited ``space.purge`` (hub chain)
"""

from __future__ import annotations

import json
from typing import Any

from hub import audit
from hub.access import Principal, space_access_txn
from hub.admin import direct
from hub.keys import HubKey
from hub.store.db import Store
from hub.store.space_delete_sql import (
    deleted_at_txn,
    deleted_before_txn,
    impact_txn,
    purge_space_txn,
    set_deleted_txn,
)
from hub.store.spaces_sql import deleted_statement_txn
from shared.canonical import canonical_str
from shared.errors import Forbidden, InvalidRequest, SpaceDeleted
from shared.signed import DELETION_DOMAIN, deletion_body, sign_statement

DAY_MS = 24 * 3600 * 1000


def fresh_refusal(key: HubKey, e: SpaceDeleted, nonce: str) -> SpaceDeleted:
    """``e`` (the refusal of a deleted space) with its statement signed now, over the
    caller's ``nonce``: freshness for a replica that is about to stop on it."""
    st = e.details.get("statement")
    if not isinstance(st, dict):
        return e
    body = deletion_body(space=st["space"], name=st["name"], deleted_at=st["deleted_at"],
                         purge_after=st["purge_after"], nonce=nonce)
    return SpaceDeleted(e.message, dict(e.details, statement=sign_statement(
        key.private, DELETION_DOMAIN, body)))


def _owner(p: Principal) -> None:
    direct(p)
    if not p.is_owner:
        raise Forbidden("only hub owners delete and restore spaces",
                        {"reason": "owner_only"})


def statement_txn(conn: Any, space_id: str) -> dict[str, Any] | None:
    """The deleted space's hub-signed deletion statement, else None."""
    raw = deleted_statement_txn(conn, space_id)
    return None if raw is None else json.loads(raw)


def _change(store: Store, key: HubKey | None, p: Principal, space_ref: str, now: int,
            retention_days: int, *, dry_run: bool, deleting: bool) -> dict[str, Any]:
    _owner(p)

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True, deleted=True)
        if deleting == (space.deleted_at is not None):
            raise InvalidRequest(f"space {space.name!r} is "
                                 + ("already deleted" if deleting else "not deleted"),
                                 {"reason": "already_deleted" if deleting else "not_deleted"})
        out: dict[str, Any] = {"space": space.id, "name": space.name,
                               "impact": impact_txn(conn, space.id), "dry_run": dry_run}
        if deleting:
            purge_after = now + retention_days * DAY_MS
            out.update(deleted_at=now, purge_after=purge_after)
        if dry_run:
            return out
        if deleting:
            assert key is not None
            st = sign_statement(key.private, DELETION_DOMAIN, deletion_body(
                space=space.id, name=space.name, deleted_at=now, purge_after=purge_after))
            set_deleted_txn(conn, space.id, now, canonical_str(st))
        else:
            set_deleted_txn(conn, space.id, None, None)
        audit.record_hub_txn(conn, at=now, action="space.delete" if deleting else
                             "space.restore", actor=p.actor(),
                             details={"space": space.id, "name": space.name,
                                      **out["impact"]})
        return out

    return store.run_write(txn)


def delete_space(store: Store, key: HubKey, p: Principal, space_ref: str,
                 body: dict[str, Any], now: int, retention_days: int) -> dict[str, Any]:
    return _change(store, key, p, space_ref, now, retention_days,
                   dry_run=body.get("dry_run") is True, deleting=True)


def restore_space(store: Store, p: Principal, space_ref: str, body: dict[str, Any],
                  now: int) -> dict[str, Any]:
    return _change(store, None, p, space_ref, now, 0, dry_run=body.get("dry_run") is True,
                   deleting=False)


def purge_expired(store: Store, now: int, retention_days: int) -> list[dict[str, Any]]:
    """Remove, for good, every space deleted ``retention_days`` ago or more; one
    transaction a space. Returns what was purged (id, name, deleted_at)."""
    cutoff = now - retention_days * DAY_MS
    with store.read() as conn:
        due = deleted_before_txn(conn, cutoff)
    done = []
    for space_id, name, deleted_at in due:
        def txn(conn: Any, space_id: str = space_id, name: str = name,
                deleted_at: int = deleted_at) -> dict[str, Any] | None:
            at = deleted_at_txn(conn, space_id)
            if at is None or at > cutoff:
                return None  # restored (or purged) meanwhile
            rows = purge_space_txn(conn, space_id)
            details = {"space": space_id, "name": name, "deleted_at": deleted_at,
                       "rows": rows}
            audit.record_hub_txn(conn, at=now, action="space.purge",
                                 actor={"system": "retention"}, details=details)
            return details
        out = store.run_write(txn)
        if out is not None:
            done.append(out)
    return done
