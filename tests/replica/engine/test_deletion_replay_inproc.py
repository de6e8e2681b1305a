"""A space-deletion statement is fresh or it is not believed (against the real hub
in-process, its answers replayed by tests/kit/hostile.py).

The attack (issue 29): someone between a replica and its hub captures the hub's
``space_deleted`` answer while a space is deleted; an admin restores the space; the captured
answer, replayed, carries a statement the hub key really signed, and every replica that
meets it stopped syncing (suspended, exit 5) although the space was live. Now a replica
believes a deletion only from a statement signed over a nonce it has just sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from replica.engine.deleted import VerifiedDeletion
from shared.entry import Entry
from shared.errors import HubUnverified
from tests.kit.hostile import Hostile
from tests.kit.inproc import Space


def test_a_replayed_deletion_statement_does_not_stop_a_replica(tmp_path: Path,
                                                               space: Space) -> None:
    a = space.replica(tmp_path, "a", wrap=Hostile)
    base = f"/v1/spaces/{space.id}"
    try:
        a.write(Entry(id="page/one", title="One", body="v1\n"))
        a.sync()
        space.admin.admin_post(f"{base}/delete", {})
        with pytest.raises(VerifiedDeletion):  # the real deletion: believed
            a.sync()
        captured = [s for s in a.transport.served if s.status == 410]
        assert captured, [s.status for s in a.transport.served]
        space.admin.admin_post(f"{base}/restore", {})
        a.transport.replay(captured[-1])  # every head answered with the captured refusal
        with pytest.raises(HubUnverified) as e:
            a.sync()
        assert e.value.details.get("reason") == "deletion_unverified", e.value.details
        a.transport.hooks.clear()
        a.write(Entry(id="page/one", title="One", body="v2\n"))
        a.sync()  # the honest hub: the space is live, the replica goes on
        assert space.live()["page/one"].body == "v2\n"
    finally:
        a.close()
