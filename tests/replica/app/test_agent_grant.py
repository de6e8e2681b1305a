"""The delegation an MCP session holds (replica/app/agent_grant.py), with an injected clock and
hub calls: minted on first use, renewed at a quarter of its lifetime left (the old one
revoked), a revocation stops the session for good (never re-minted), an expiry is a lapse
(minted again), offline is not a refusal, the lifetime is bounded."""

from __future__ import annotations

from typing import Any

import pytest

from replica.app.agent_grant import AgentGrant
from shared.errors import InvalidRequest, TransferFailed, Unauthorized


class Hub:
    def __init__(self) -> None:
        self.now = 1000.0
        self.minted: list[dict[str, Any]] = []
        self.revoked: list[str] = []
        self.refuse: str | None = None
        self.offline = False

    def mint(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.offline:
            raise TransferFailed("down")
        n = len(self.minted) + 1
        self.minted.append(body)
        return {"token": f"t{n}", "delegation": {
            "id": f"d{n}", "expires_at": int((self.now + body["ttl_seconds"]) * 1000)}}

    def probe(self, token: str) -> None:
        if self.offline:
            raise TransferFailed("down")
        if self.refuse:
            raise Unauthorized("no", {"reason": self.refuse})


def grant(hub: Hub, ttl: int = 8 * 3600, write: bool = False) -> AgentGrant:
    return AgentGrant(space="s1", agent="bot", write=write, ttl_s=ttl, mint=hub.mint,
                      revoke=hub.revoked.append, probe=hub.probe, clock=lambda: hub.now)


def test_minted_on_first_use_read_unless_write() -> None:
    hub = Hub()
    g = grant(hub)
    assert hub.minted == []
    g.check()
    assert hub.minted == [{"space": "s1", "agent": "bot", "scope": "read",
                           "ttl_seconds": 8 * 3600}]
    assert grant(Hub(), write=True).describe()["scope"] == "write"


def test_renewed_near_expiry_and_the_old_one_revoked() -> None:
    hub = Hub()
    g = grant(hub, ttl=4000)
    g.check()
    hub.now += 2000  # half the lifetime left: kept
    g.check()
    assert len(hub.minted) == 1
    hub.now += 1100  # less than a quarter left: renewed
    g.check()
    assert len(hub.minted) == 2 and hub.revoked == ["d1"] and g.token() == "t2"


def test_a_revocation_stops_the_session_for_good() -> None:
    hub = Hub()
    g = grant(hub)
    g.check()
    hub.refuse = "delegation_revoked"
    with pytest.raises(Unauthorized):
        g.check()
    hub.refuse = None
    for _ in range(2):
        with pytest.raises(Unauthorized) as e:
            g.check()
        assert e.value.details["reason"] == "delegation_revoked"
    assert len(hub.minted) == 1  # never re-minted


def test_an_expiry_is_a_lapse_not_a_revocation() -> None:
    hub = Hub()
    g = grant(hub)
    g.check()
    hub.refuse = "delegation_expired"
    orig = hub.probe

    def probe_once(token: str) -> None:
        hub.refuse = None if token == "t2" else hub.refuse
        orig(token)
    g._probe = probe_once  # the re-minted token is accepted
    g.check()
    assert len(hub.minted) == 2 and g.ready


def test_offline_is_not_a_refusal() -> None:
    hub = Hub()
    hub.offline = True
    g = grant(hub)
    g.check()  # no exception: local tools keep working
    assert not g.ready  # but nothing can be published as the agent yet
    hub.offline = False
    g.check()
    assert g.ready


@pytest.mark.parametrize("ttl", [0, 59, 24 * 3600 + 1])
def test_lifetime_is_bounded(ttl: int) -> None:
    with pytest.raises(InvalidRequest):
        grant(Hub(), ttl=ttl)
