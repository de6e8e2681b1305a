"""``quire accept-restore``: a member accepts that the hub lost its data and was restored
from a backup older than what this replica holds (docs/operations.md, "If the data folder
is lost").

    quire sync ──► the hub's new epoch ends the old one before our head, and its signed
                   statement says why (a restore whose backup point is where the old epoch
                   ends: hub/restore.py ``restore_lost``) ──► refused, ``hub_unverified``
                   reason ``restore_behind``, nothing applied; the status file keeps it
    quire accept-restore ──► that epoch (from the refusal this replica recorded, never from
                   the hub's word now) into store meta ``accepted_restore``
    quire sync ──► the snapshot of exactly that epoch is taken; what this replica holds from
                   after the backup is published again (replica/engine/restored.py)

A hub cannot roll a replica back by itself: the refusal stands until a person accepts it,
and the acceptance names one epoch. A watcher's syncs pick it up too.
"""

from __future__ import annotations

from typing import Any

from replica.app.service import read_saved_status
from replica.engine.restored import ACCEPTED_RESTORE
from replica.machine.home import SpaceConfig
from shared.errors import InvalidRequest


def accept(space: SpaceConfig) -> dict[str, Any]:
    """Record the acceptance of the restore the last sync refused (``InvalidRequest`` when
    the last sync was not refused for one)."""
    from replica.store.store import Store

    err = read_saved_status(space).get("last_error") or {}
    details = err.get("details") if isinstance(err, dict) else None
    epoch = details.get("epoch") if isinstance(details, dict) else None
    if not (isinstance(details, dict) and details.get("reason") == "restore_behind"
            and isinstance(epoch, str)):
        raise InvalidRequest(f"nothing to accept in {space.name}: its last sync was not "
                             "refused for a restore of the hub from a backup (run "
                             f"'quire sync {space.name}' first)",
                             {"reason": "no_restore_refused"})
    store = Store(space.store_path)
    try:
        store.set_meta(ACCEPTED_RESTORE, epoch)
    finally:
        store.close()
    return {"space": {"id": space.space_id, "name": space.name}, "accepted_epoch": epoch,
            "restored_at": details.get("restored_at"),
            "backup_seq": details.get("snapshot_seq"), "local_seq": details.get("local_seq")}
