"""Crossing a restore from backup (hub/restore.py): what this replica republishes.

A restore starts a new epoch whose content is the backup's; its signed statement names the
backup's head of the space (``restored_from``: epoch E_b, seq S_b). Whatever this replica
holds as *synced* that was published after that point is missing on the hub, or older there.
Taking the snapshot the usual way would make the hub's older state the replica's and
overwrite the member's files. Instead:

    history rows (kind batch or push: changes this replica pulled or published)
      in E_b after S_b, or in an epoch after E_b and before the restore
        ──▶ their entry ids: the entries to republish
    snapshot merge of such an entry: synced ← the hub's (restored) state,
                                     local  ← what the replica holds (file unchanged)
        ──▶ dirty: published again in the next push, on top of the restored version

Several replicas holding the same post-backup version all try; the first batch wins and the
others' pushes meet ``head_changed``, pull it and find local == theirs: nothing left to
publish, so each change is republished once. Entries the replica only got through a clone
(a snapshot row, no batch) after the backup are left to the replicas that pulled or pushed
them as batches (the author always did).
"""

from __future__ import annotations

import json

from replica.store.db import Conn
from shared.errors import QuireError
from shared.signed import EpochStatement, epoch_path

# store meta: the epoch of a restore the member accepted although it ends before this
# replica's head (the hub lost its data: replica/trust/verify.py ``snapshot_path``)
ACCEPTED_RESTORE = "accepted_restore"


def restore_point(path: list[EpochStatement]) -> EpochStatement | None:
    """The last restore statement on the replica's path to the hub's epoch, if any."""
    found = [s for s in path if s.restored_from is not None]
    return found[-1] if found else None


def republish_ids_txn(conn: Conn, statements: list[EpochStatement],
                      restore: EpochStatement) -> set[str]:
    """Entry ids this replica holds from changes published after the backup (above)."""
    assert restore.restored_from is not None
    b_epoch, b_seq, _ = restore.restored_from
    later: set[str] = set()
    if b_epoch != restore.previous:
        try:  # the epochs that began after the backup's and ended with the restore
            later = {s.epoch for s in epoch_path(statements, b_epoch, restore.previous)}
        except QuireError:
            later = set()
    ids: set[str] = set()
    for epoch, seq, entries in conn.execute(
            "SELECT epoch, seq, entries FROM history WHERE kind IN ('batch', 'push')"):
        if (epoch == b_epoch and seq > b_seq) or epoch in later:
            ids.update(json.loads(entries))
    return ids

