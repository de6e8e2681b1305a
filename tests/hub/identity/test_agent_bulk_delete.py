"""An agent's mass delete is refused by the hub unless the space's rules allow it
(``default:agents-no-bulk-delete``, shared/policy.py ``bulk_deletes``; docs/security.md,
"Rules"): an agent has nobody to confirm what a person's replica holds for confirmation
(replica/engine/mass_delete.py). On 0506cf5 the agent's batch deleting 60 pages was
accepted (201) and the space was left with none of them."""

from __future__ import annotations

from typing import Any

import pytest

from shared.dpop import make_proof
from shared.policy import BulkDelete, Change, bulk_deletes
from tests.kit.wire import WireMember, WireTeam, delete, put


def _as_agent(t: WireTeam, m: WireMember, token: str, ops: list[Any]) -> Any:
    body = m.batch(t.space, ops)
    path = f"/v1/spaces/{t.space}/batches"
    return t.raw.post(path, json=body, headers={
        "Authorization": f"DPoP {token}",
        "DPoP": make_proof(m.key, "POST", t.url + path, access_token=token)})


def _pages(t: WireTeam, prefix: str, n: int) -> list[tuple[str, str]]:
    ops = [put(f"{prefix}/p{i:03}") for i in range(n)]
    assert t.editor.publish(t.space, ops).status_code == 201
    return [(op.entry_id, op.entry.version) for op in ops]


def test_an_agent_deleting_sixty_pages_is_refused_unless_a_rule_allows_it(
        team: WireTeam) -> None:
    t = team
    pages = _pages(t, "bulk", 60)
    token = t.delegate(t.editor, "write", agent="cleaner")["token"]
    before = t.counts()
    r = _as_agent(t, t.editor, token, [delete(eid, v) for eid, v in pages])
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "policy_denied" and len(err["details"]["denied"]) == 60
    assert err["details"]["denied"][0]["rule"] == "default:agents-no-bulk-delete"
    assert "bulk delete" in err["message"]
    assert t.counts()["entries"] == before["entries"]  # nothing deleted
    # a few deletes are not a bulk delete
    assert _as_agent(t, t.editor, token, [delete(eid, v) for eid, v in pages[:3]]
                     ).status_code == 201
    # the person (not an agent) deletes the rest as usual: their replica asked them first
    assert t.editor.publish(t.space, [delete(eid, v) for eid, v in pages[3:30]]
                            ).status_code == 201
    # an admin's rule lets this agent make bulk deletes of bulk/*
    more = _pages(t, "bulk2", 60)
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "allow", "who": "agent:cleaner", "actions": ["bulk_delete"],
        "entries": "bulk2/*"})
    assert r.status_code == 201, r.text
    rule_id = r.json()["rule"]["id"]
    try:
        token = t.delegate(t.editor, "write", agent="cleaner")["token"]
        r = _as_agent(t, t.editor, token, [delete(eid, v) for eid, v in more])
        assert r.status_code == 201, r.text
        other = t.delegate(t.editor, "write", agent="other")["token"]
        again = _pages(t, "bulk2", 60)  # created again: another agent may not bulk delete
        r = _as_agent(t, t.editor, other, [delete(eid, v) for eid, v in again])
        assert r.status_code == 403, r.text
    finally:
        t.owner.post(f"/v1/spaces/{t.space}/rules/{rule_id}/remove", {})


@pytest.mark.parametrize(("deletes", "live", "bulk"), [
    (3, 8, False), (50, 10_000, False), (51, 10_000, True), (11, 40, True), (11, 45, False),
])
def test_the_bulk_delete_table(deletes: int, live: int, bulk: bool) -> None:
    changes = [Change(f"page/p{i}", "delete") for i in range(deletes)] + [
        Change("page/kept", "update")]
    got = bulk_deletes(changes, live, BulkDelete())
    assert (len(got) == deletes) if bulk else not got
    assert all(c.action == "bulk_delete" for c in got)
