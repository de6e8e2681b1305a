"""The MCP proposal tools (replica/mcp/proposal_tools.py) against the real hub in-process:
``propose`` files on the version the replica last synced, under the session's delegation;
``proposals`` shows the decision by the member's name and local times, no people's ids;
``withdraw`` takes one back; a proposal on a version the hub no longer has is
``base_mismatch`` with the advice to sync. (The stdio flow with the real CLI:
tests/e2e/test_proposals_e2e.py, with QUIRE_LONG_E2E.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replica.mcp.proposal_tools import ProposalTools
from shared.errors import BaseMismatch, InvalidRequest
from tests.hub.proposals.test_attested_replica import agent_client, guardrail
from tests.kit.inproc import Local, Space

LOWERED = {"title": "deploy", "body": "never on fridays, unless on call\n",
           "tags": None, "links": None, "meta": {"severity": "warn"}}


class AgentSeams:
    """What the tools take from their MCP session (replica/mcp/session.py): its one space
    (this replica's store) and a client carrying its delegation, never the device's."""

    def __init__(self, sp: Space, local: Local, agent: str):
        self.sp, self.local, self.agent = sp, local, agent

    def space(self) -> Any:
        return SimpleNamespace(space_id=self.sp.id, name=self.sp.name,
                               store_path=self.local.store.path)

    def hub_client(self) -> Any:
        return agent_client(self.sp, self.local, self.agent)


def test_propose_list_and_withdraw(space: Space, tmp_path: Path) -> None:
    alice = space.replica(tmp_path, "alice")
    alice.write(guardrail("block").entry)
    alice.sync()
    tools = ProposalTools(AgentSeams(space, alice, "scout"))
    with pytest.raises(InvalidRequest):  # a change needs the whole entry, or delete
        tools.propose("guardrail/deploy", "why", None, "body\\n", None, None, None, False)
    p = tools.propose("guardrail/deploy", "the on-call runbook allows it", delete=False,
                      **LOWERED)
    assert p["state"] == "open" and p["op"] == "put" and "member" in p["next"]
    gone = tools.propose("guardrail/deploy", "retired", None, None, None, None, None, True)
    assert gone["op"] == "delete"
    owner = space.hub.owner.client()
    with owner:
        owner.admin_post(f"/v1/spaces/{space.id}/proposals/{p['proposal']}/reject",
                         {"reason": "Fridays stay frozen"})
    assert tools.withdraw(gone["proposal"])["state"] == "withdrawn"
    rows = {r["proposal"]: r for r in tools.proposals("all")["proposals"]}
    rejected = rows[p["proposal"]]
    assert rejected["state"] == "rejected" and rejected["note"] == "Fridays stay frozen"
    assert rejected["decided_by"] == "owner" and "T" in rejected["decided_at"]
    assert "user" not in rejected and "decided_by_id" not in rejected
    # the hub moved on since this replica synced: base_mismatch, with what to do
    bob = space.replica(tmp_path, "bob", "admin")
    bob.sync()
    bob.write(guardrail("block", body="never, not even on call\n").entry)
    bob.sync()
    with pytest.raises(BaseMismatch) as e:
        tools.propose("guardrail/deploy", "still", delete=False, **LOWERED)
    assert "call sync" in e.value.message
    alice.close()
    bob.close()
