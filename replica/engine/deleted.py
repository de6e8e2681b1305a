"""A space deleted on the hub (``quire admin space delete``; hub/space_delete.py), as a
replica takes it: verified, then stopped, nothing local touched.

    hub answers ``space_deleted`` (410) to a pull or a push
      └─ confirm(): asked again, ``GET …/head?nonce=N`` with a nonce made now; the answer
         must be ``space_deleted`` too, and verify(): its hub-signed deletion statement,
         for this space, under the pinned hub key, signed over exactly N (shared/signed.py
         parse_deletion_statement). A statement the hub really signed while the space was
         deleted, captured and replayed after a restore, carries no nonce of ours: refused
           ├─ verifies ─> ``VerifiedDeletion``: the sync stops; status says suspended
           │              (reason space_deleted); a watcher stops watching the space
           └─ does not ─> ``HubUnverified``: an answer anyone between us and the hub
                          could have made; a watcher backs off and tries again

Either way the vault, the store, the outbox and every local edit stay exactly as they are:
a deleted space's replica keeps its files (the hub keeps the data until its retention
ends; an admin's ``quire admin space restore`` brings it back and the next sync resumes).
``VerifiedDeletion`` is never built from a wire answer (it is not in
shared/errors.ERROR_CLASSES), so only this check can produce it.
"""

from __future__ import annotations

from typing import Any

from shared.errors import HubUnverified, QuireError, SpaceDeleted
from shared.humanize import when
from shared.signed import Keys, parse_deletion_statement


class VerifiedDeletion(SpaceDeleted):
    """``space_deleted`` whose hub-signed statement verified for this space."""


def confirm(client: Any, space_id: str, e: SpaceDeleted) -> QuireError:
    """The error a sync raises for the hub's ``space_deleted`` answer ``e``: confirmed by a
    fresh refusal (a head asked for over a new nonce), then verified; any other answer to
    that head means ``e`` was not the hub's word now (``HubUnverified``)."""
    from replica.trust.verify import new_nonce

    nonce = new_nonce()
    try:
        client.head(space_id, nonce=nonce)
    except SpaceDeleted as fresh:
        return verify(client.hub_keys, space_id, fresh, nonce)
    return HubUnverified("the hub answered space_deleted, but a head it signed just now says "
                         "the space is live; nothing was changed",
                         {"reason": "deletion_unverified"})


def verify(hub_keys: Keys, space_id: str, e: SpaceDeleted, nonce: str | None = None
           ) -> QuireError:
    """The error a sync raises for the hub's ``space_deleted`` answer ``e``; ``hub_keys``:
    the pinned key chain (a deletion signed before a key rotation still verifies);
    ``nonce``: the statement must be signed over it (``confirm``)."""
    try:
        st = parse_deletion_statement(hub_keys, e.details.get("statement"), space=space_id,
                                      nonce=nonce)
    except HubUnverified as bad:
        return HubUnverified("the hub answered space_deleted without a valid hub-signed "
                             "deletion statement for this space; nothing was changed",
                             dict(bad.details, reason="deletion_unverified"))
    return VerifiedDeletion(
        f"space {st.name} was deleted on the hub ({when(st.deleted_at)}); this replica "
        f"stopped and keeps its vault and store; the hub purges the space's data "
        f"{when(st.purge_after)} unless an admin restores it",
        {"space": st.space, "name": st.name, "deleted_at": st.deleted_at,
         "purge_after": st.purge_after, "verified": True})

