"""Re-registering a space's replica after this machine logged in as a new device.

A revoked device's replica id and outbox batch belong to the old device key: the hub
refuses both for good (``unknown_replica``: a replica is bound to the device that
registered it). After ``quire login`` made a new device key, the next ``quire sync`` calls
``ensure_current_replica`` under the space lock, which:

1. settles the outbox batch signed by the old key: it asks the hub for its receipt (with
   the new device's credentials: same member, and receipts are readable by any member).
   Found: the batch was accepted before the revocation, so its receipt is applied (or, if
   our head moved on, the batch is dropped and the pull brings it back as published).
   ``not_found``: it was never accepted, and it never can be: only the old device could
   send it, and the hub refuses that device on every request and at the guard. It is
   dropped; its changes are still dirty in the store and go out in a new batch, with a new
   id, signed by the new key. Any other answer aborts (nothing changed; the next sync
   tries again), so a batch is never both accepted and rebuilt: published exactly once.
2. registers a new replica for the new device and saves it in ``space.json``.

Every local change stays dirty throughout: nothing is lost. A crash between the steps is
harmless (a registered but unused replica id on the hub at worst).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from replica.engine.sync import Replica
from replica.machine.home import HubConfig, SpaceConfig
from replica.store import store as st
from shared.errors import NotFound
from shared.wire import parse_batch


def ensure_current_replica(space: SpaceConfig, hub: HubConfig, rep: Replica
                           ) -> dict[str, Any] | None:
    """Register a new replica when the space's was made by another device (see above);
    None when nothing had to change."""
    if hub.device_id is None or space.device_id == hub.device_id:
        return None
    if space.device_id is None and _registered_here(space, hub, rep):
        space.device_id = hub.device_id  # a space joined before space.json named its device
        space.save()
        return None
    settled = []
    for row in rep.store.outbox():
        batch = parse_batch(row["body"])
        try:
            receipt = rep.client.receipt(space.space_id, batch.replica_id, batch)
        except NotFound:
            receipt = None
        head = rep.store.head()
        with rep.store.tx() as conn:
            if receipt is not None and head is not None and (
                    batch.epoch, batch.parent_seq, batch.parent_digest) == (
                    head.epoch, head.seq, head.digest):
                rep.ledger.apply_receipt_txn(conn, batch, receipt)
            else:
                st.drop_outbox_txn(conn, batch.batch_id)
        settled.append({"batch_id": batch.batch_id, "accepted": receipt is not None})
    old = space.replica_id
    space.replica_id = rep.client.register_replica(space.space_id, hub.device_name)
    space.device_id = hub.device_id
    space.save()
    rep.replica_id = rep.client.replica_id = space.replica_id
    return {"previous_replica_id": old, "replica_id": space.replica_id, "outbox": settled}


def _registered_here(space: SpaceConfig, hub: HubConfig, rep: Replica) -> bool:
    doc = rep.client.admin_get(f"/v1/spaces/{quote(space.space_id, safe='')}/replicas")
    return any(r.get("id") == space.replica_id and r.get("device_id") == hub.device_id
               for r in doc.get("replicas", []))
