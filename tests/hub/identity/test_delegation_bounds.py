"""Delegations are bounded: live ones per member and agent, and per member (on the real hub
app, in-process). Before, a member (or anything holding the member's device credential)
minted delegations in a loop without limit: rows, tokens and audit events without end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.wire import WireTeam, make_wire_team


@pytest.fixture
def team(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireTeam]:
    monkeypatch.setenv("QUIRE_HUB_DELEGATIONS_PER_AGENT", "5")  # small: a quick test
    monkeypatch.setenv("QUIRE_HUB_DELEGATIONS_PER_MEMBER", "20")
    yield from make_wire_team(tmp_path / "data", None)


def _mint(team: WireTeam, agent: str) -> Any:
    return team.owner.post("/v1/delegations", {"space": team.space, "agent": agent,
                                               "scope": "read", "ttl_seconds": 3600})


def test_live_delegations_are_bounded_per_agent_and_per_member(team: WireTeam) -> None:
    s = team.hub.settings
    per_agent, per_member = s.delegations_per_agent, s.delegations_per_member
    answers = [_mint(team, "looper") for _ in range(per_agent + 5)]
    assert [r.status_code for r in answers[:per_agent]] == [201] * per_agent
    over = answers[per_agent:]
    assert {r.status_code for r in over} == {413}, over[0].text
    err = over[0].json()["error"]
    assert err["code"] == "quota_exceeded" and err["details"]["limit"] == per_agent
    assert "quire delegate revoke" in err["message"]
    # a revoked one frees its place (what an MCP session's renewal does: mint, then revoke)
    first = answers[0].json()["delegation"]["id"]
    r = team.owner.post(f"/v1/delegations/{first}/revoke", {})
    assert r.status_code == 200, r.text
    assert _mint(team, "looper").status_code == 201
    # many agents: bounded per member too
    made = per_agent
    codes = []
    for i in range(per_member):
        codes.append(_mint(team, f"agent-{i}").status_code)
    assert codes.count(201) == per_member - made and set(codes[per_member - made:]) == {413}
    live = [d for d in team.owner.get("/v1/delegations").json()["delegations"]
            if not d.get("revoked_at")]
    assert len(live) == per_member
