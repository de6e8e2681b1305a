"""A hub-attested batch (hub/attested_publish.py) at the replicas: an accepted proposal is
verified and applied like any device's batch (its device is one the hub attests), and the
same change re-signed by a key the hub does not attest is refused (replica/trust/verify.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replica.hubclient.auth import DPoPAuth
from replica.hubclient.client import HubClient
from replica.machine.credentials import Tokens
from shared.errors import HubUnverified
from shared.signing import BATCH_DOMAIN, new_private_key, sign
from shared.wire import Op
from tests.kit.hostile import Hostile
from tests.kit.inproc import BASE_URL, Local, Space
from tests.kit.wire import put


def agent_client(sp: Space, local: Local, agent: str) -> HubClient:
    """A client carrying a delegation of ``local``'s device for ``agent``."""
    with local.device.client() as c:
        d = c.admin_post("/v1/delegations", {"space": sp.id, "agent": agent,
                                             "scope": "write", "ttl_seconds": 3600})
    hub = sp.hub
    return HubClient(BASE_URL, auth=DPoPAuth(local.device.key,
                                             Tokens(d["token"], None, 2**62, hub.url)),
                     transport=hub.transport, hub_key=hub.public_key)


def guardrail(sev: str, base: str | None = None, body: str = "never on fridays\n") -> Op:
    return put("guardrail/deploy", body, base=base, title="deploy", meta={"severity": sev})


def _resign(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attested batch as a forger would send it: signed by a key nobody attests."""
    for x in lines:
        b = x.get("batch")
        if b and (b.get("provenance") or {}).get("attested") == "hub":
            b["signature"] = sign(new_private_key(), BATCH_DOMAIN, b["digest"].encode())
    return lines


def test_replica_applies_attested_batch_and_refuses_a_forged_one(
        space: Space, tmp_path: Path) -> None:
    alice = space.replica(tmp_path, "alice")
    carol = space.replica(tmp_path, "carol")
    dave = space.replica(tmp_path, "dave", wrap=Hostile)
    g = guardrail("block")
    alice.write(g.entry)
    alice.sync()
    carol.sync()
    dave.sync()
    version = alice.read("guardrail/deploy")
    assert version is not None and version.meta["severity"] == "block"
    lowered = guardrail("warn", base=version.version)
    with agent_client(space, alice, "scout") as agent:
        pid = agent.admin_post(f"/v1/spaces/{space.id}/proposals",
                               {"op": lowered.to_wire(),
                                "reason": "warn is what the runbook says"})["proposal"]["id"]
    owner = space.hub.owner.client()
    with owner:
        out = owner.admin_post(f"/v1/spaces/{space.id}/proposals/{pid}/accept", {})
    assert out["proposal"]["state"] == "accepted"
    # a replica that pulls it checks the receipt, the chain and the device signature
    carol.sync()
    got = carol.read("guardrail/deploy")
    assert got is not None and got.meta["severity"] == "warn"
    last = space.changes()[-1]
    assert last["author"]["agent"] == "scout"
    assert last["author"]["user"] == space.hub.owner.user_id
    assert last["batch"]["provenance"]["approved_by"] == space.hub.owner.user_id
    # the same batch signed by a key the hub does not attest: refused, nothing applied
    dave.transport.on_lines("changes", _resign)
    with pytest.raises(HubUnverified) as e:
        dave.sync()
    assert e.value.details["reason"] == "bad_device_signature"
    got = dave.read("guardrail/deploy")
    assert got is not None and got.meta["severity"] == "block"
    for r in (alice, carol, dave):
        r.close()
