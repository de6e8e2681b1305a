"""A scoped member's replica against the real hub in-process (replica/engine/scoped.py,
replica/trust/scoped.py; decisions.md D142, D149): it clones and syncs verified against
the signed state root while the hub leaves out what its read rules hide; hidden entries are
in neither its store nor its vault; an entry that leaves its scope (a tag, a rule) is
removed as a purge removes, a local edit of it held and reported; widening brings the
entries back. A hub that lies about what it left out is refused, nothing applied."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from shared.entry import Entry
from shared.errors import HubUnverified
from tests.kit.hostile import Hostile
from tests.kit.inproc import Local, Space

OPEN = Entry(id="page/open/a", title="Open", body="for everyone\n")
PAY = Entry(id="page/hr/pay", title="Pay", body="pay bands\n")
HIRING = Entry(id="page/hr/hiring", title="Hiring", body="who we hire\n")


def _rule(space: Space, who: str, entries: str, **more: Any) -> str:
    res = space.admin.admin_post(f"/v1/spaces/{space.id}/rules",
                                 {"effect": "deny", "who": who, "actions": ["read"],
                                  "entries": entries, **more})
    return str(res["rule"]["id"])


def _unrule(space: Space, rule: str) -> None:
    space.admin.admin_post(f"/v1/spaces/{space.id}/rules/{rule}/remove", {})


def _ids(r: Local) -> set[str]:
    return {eid for eid, s in r.store.states().items()
            if s.synced is not None and not s.synced.deleted}


def _withheld(r: Local) -> int:
    with r.store.snapshot() as conn:
        return len(list(conn.connection.execute("SELECT 1 FROM withheld_buckets")))


@pytest.fixture
def world(tmp_path, space):
    alice = space.replica(tmp_path, "alice", durable=False)
    for e in (OPEN, PAY, HIRING):
        alice.write(e)
    alice.sync()
    bob = space.replica(tmp_path, "bob", wrap=Hostile, durable=False)  # (a lie is programmed per test)
    yield space, alice, bob
    alice.close()
    bob.close()


def test_a_scoped_member_clones_and_syncs_verified_without_the_hidden_entries(world):
    space, alice, bob = world
    _rule(space, bob.device.user_id, "page/hr/*")
    rep = bob.sync()  # a snapshot that leaves hr out, checked against the signed root
    assert rep.snapshot and _ids(bob) == {OPEN.id}
    assert set(bob.files()) == {"page/open/a.md"} and _withheld(bob) > 0
    # an edit of a hidden entry and of a readable one: a redacted batch, verified
    alice.write(Entry(id=PAY.id, title="Pay", body="pay bands, raised\n"))
    alice.write(Entry(id=OPEN.id, title="Open", body="for everyone, again\n"))
    alice.sync()
    rep = bob.sync()
    assert rep.pulled == 1 and not rep.snapshot
    assert bob.read(OPEN.id).body == "for everyone, again\n"
    assert _ids(bob) == {OPEN.id} and "raised" not in json.dumps(bob.files(), default=str)
    # a batch wholly outside the scope: chained and summed, nothing to tell
    alice.write(Entry(id=HIRING.id, title="Hiring", body="nobody\n"))
    alice.sync()
    rep = bob.sync()
    assert rep.pulled == 1 and rep.changes == [] and _ids(bob) == {OPEN.id}
    assert bob.store.head().seq == alice.store.head().seq
    # and bob's own publication still verifies (the confirm after a push)
    bob.write(Entry(id="page/open/b", title="B", body="bob's\n"))
    assert bob.sync().pushed == 1
    alice.sync()
    assert alice.read("page/open/b") is not None


def test_an_entry_tagged_out_of_scope_leaves_and_an_edit_of_it_is_held(world):
    space, alice, bob = world
    _rule(space, bob.device.user_id, "*", tags=["secret"])
    bob.sync()
    assert _ids(bob) == {OPEN.id, PAY.id, HIRING.id}
    # bob edits HIRING locally (not yet published) while alice hides both hr entries
    alice.write(Entry(id=PAY.id, title="Pay", body="pay bands\n", tags=("secret",)))
    alice.write(Entry(id=HIRING.id, title="Hiring", body="who we hire\n", tags=("secret",)))
    alice.sync()
    bob.write(Entry(id=HIRING.id, title="Hiring", body="who we hire, bob's note\n"))
    rep = bob.sync()  # the pulled batch's ``was`` marks name the versions bob held
    assert not rep.snapshot
    assert _ids(bob) == {OPEN.id}
    assert {d["id"]: d["held"] for d in rep.left_scope} == {PAY.id: False, HIRING.id: True}
    assert not bob.path(PAY.id).exists()
    assert bob.held() == {HIRING.id}  # held, never lost, never published
    assert "bob's note" in bob.path(HIRING.id).read_text()
    assert "bob's note" not in space.live()[HIRING.id].body
    # untagged again: it comes back into the scope (its old version leaves the sums)
    alice.write(Entry(id=PAY.id, title="Pay", body="pay bands v2\n"))
    alice.sync()
    bob.sync()
    assert bob.read(PAY.id).body == "pay bands v2\n"


def _tamper_lattices(resp_lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for line in resp_lines:
        w = line.get("withheld")
        if w and w["lattices"]:
            b = sorted(w["lattices"])[0]
            lat = bytearray(base64.b64decode(w["lattices"][b]))
            lat[0] ^= 1
            w = dict(w, lattices=dict(w["lattices"], **{b: base64.b64encode(bytes(lat))
                                                        .decode()}))
            line = dict(line, withheld=w)
        out.append(line)
    return out


def test_a_rule_shrinks_the_scope_a_lie_is_refused_and_widening_brings_it_back(world):
    space, alice, bob = world
    bob.sync()
    assert _ids(bob) == {OPEN.id, PAY.id, HIRING.id}
    bob.write(Entry(id=PAY.id, title="Pay", body="pay bands, bob's draft\n"))
    rule = _rule(space, bob.device.user_id, "page/hr/*")
    rep = bob.sync()  # the fingerprint changed: a snapshot of the new scope
    assert rep.snapshot and _ids(bob) == {OPEN.id}
    assert {d["id"]: d["held"] for d in rep.left_scope} == {PAY.id: True, HIRING.id: False}
    assert bob.held() == {PAY.id} and not bob.path(HIRING.id).exists()
    assert "bob's draft" in bob.path(PAY.id).read_text()
    assert space.live()[PAY.id].body == "pay bands\n"  # not published
    # a hub that lies about what it left out (one lattice lane off): refused, nothing applied
    alice.write(Entry(id=HIRING.id, title="Hiring", body="raised\n"))
    alice.write(Entry(id=OPEN.id, title="Open", body="changed\n"))
    alice.sync()
    before = (bob.store.head(), bob.files())
    lie = bob.transport.on_lines("changes", _tamper_lattices)
    with pytest.raises(HubUnverified) as e:
        bob.sync()
    assert e.value.details["reason"] == "state_mismatch"
    assert (bob.store.head(), bob.files()) == before
    bob.transport.remove(lie)
    assert bob.sync().pulled == 1 and bob.read(OPEN.id).body == "changed\n"
    _unrule(space, rule)
    rep = bob.sync()
    assert rep.snapshot and _ids(bob) >= {OPEN.id, PAY.id, HIRING.id} and _withheld(bob) == 0
    assert "bob's draft" in bob.path(PAY.id).read_text()  # still bob's, still held


def test_a_remap_under_a_kinds_rule_sends_the_replica_to_a_snapshot_that_removes_the_folder(
        world):
    """Read rules judge kinds under the space's folder mapping (D152): a remap is a scope
    change. The replica computes the hub's fingerprint from its head (rules and ``kinds``),
    takes one snapshot that removes what left, and then pulls as before (no loop)."""
    space, alice, bob = world
    _rule(space, bob.device.user_id, "*", kinds=["hr"])
    bob.sync()
    assert _ids(bob) == {OPEN.id, PAY.id, HIRING.id}  # page/hr/* are pages: no kind hr
    space.admin.admin_post(f"/v1/spaces/{space.id}/kinds", {"kinds": {"page/hr": "hr"}})
    rep = bob.sync()
    assert rep.snapshot and _ids(bob) == {OPEN.id}
    assert {d["id"] for d in rep.left_scope} == {PAY.id, HIRING.id}
    assert not bob.path(PAY.id).exists() and not bob.path(HIRING.id).exists()
    alice.write(Entry(id=OPEN.id, title="Open", body="after the remap\n"))
    alice.sync()
    rep = bob.sync()
    assert not rep.snapshot and rep.pulled == 1 and _ids(bob) == {OPEN.id}
