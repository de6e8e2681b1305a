"""A partial replica against the real hub in-process (replica/app/scope.py,
replica/engine/scoped.py; decisions.md D149): it holds and writes only the entries its
globs name, verified against the signed state root as a scoped reader is; a pull brings
only the changes inside them; a local save outside them is refused (``outside_scope``),
kept; widening brings what is new, narrowing removes files and holds an unpublished edit.
The globs are intersected with the read rules, never a way around them."""

from __future__ import annotations

import pytest

from replica.trust.scoped import ONLY
from shared.entry import Entry
from tests.kit.inproc import Local, Space

A = Entry(id="projects/alpha/plan", title="Plan", body="alpha plan\n")
B = Entry(id="projects/beta/plan", title="Beta", body="beta plan\n")
G = Entry(id="page/guide", title="Guide", body="how we work\n")
S = Entry(id="projects/alpha/secret", title="Secret", body="alpha secret\n")


def _ids(r: Local) -> set[str]:
    return {eid for eid, s in r.store.states().items()
            if s.synced is not None and not s.synced.deleted}


def _only(r: Local, *globs: str) -> None:
    r.store.set_meta(ONLY, list(globs) or None)


@pytest.fixture
def world(tmp_path, space: Space):
    alice = space.replica(tmp_path, "alice", durable=False)
    for e in (A, B, G, S):
        alice.write(e)
    alice.sync()
    bob = space.replica(tmp_path, "bob", durable=False)
    _only(bob, "projects/alpha/*", "page/guide")
    yield space, alice, bob
    alice.close()
    bob.close()


def test_a_partial_replica_clones_syncs_and_refuses_to_publish_outside(world):
    space, alice, bob = world
    rep = bob.sync()
    assert rep.snapshot and _ids(bob) == {A.id, G.id, S.id}
    assert set(bob.files()) == {"projects/alpha/plan.md", "projects/alpha/secret.md",
                                "page/guide.md"}
    # changes outside: chained and summed, not applied, not told
    alice.write(Entry(id=B.id, title="Beta", body="beta plan v2\n"))
    alice.sync()
    rep = bob.sync()
    assert rep.pulled == 1 and rep.changes == [] and not rep.snapshot
    alice.write(Entry(id=A.id, title="Plan", body="alpha plan v2\n"))
    alice.sync()
    rep = bob.sync()
    assert [op["id"] for c in rep.changes for op in c["ops"]] == [A.id]
    assert bob.read(A.id).body == "alpha plan v2\n"
    # a save outside the globs: kept, not published, the problem names the way out
    bob.write(Entry(id="projects/beta/idea", title="Idea", body="bob's idea\n"))
    rep = bob.sync()
    (d,) = [d for d in rep.policy_denied if d["id"] == "projects/beta/idea"]
    assert d["rule"] == "outside_scope" and "quire scope add" in d["message"]
    assert "projects/beta/idea" not in space.live() and bob.path("projects/beta/idea").exists()
    # widening: what is new comes in, and the saved idea is now inside: published
    _only(bob, "projects/*", "page/guide")
    rep = bob.sync()
    assert rep.snapshot and _ids(bob) >= {A.id, B.id, G.id, S.id}
    assert bob.read(B.id).body == "beta plan v2\n"
    assert space.live()["projects/beta/idea"].body == "bob's idea\n"


def test_narrowing_removes_files_and_globs_never_widen_past_a_read_rule(world):
    space, alice, bob = world
    space.admin.admin_post(f"/v1/spaces/{space.id}/rules",
                           {"effect": "deny", "who": bob.device.user_id, "actions": ["read"],
                            "entries": "projects/alpha/secret"})
    bob.sync()
    assert _ids(bob) == {A.id, G.id}  # the glob names the secret; the rule hides it
    bob.write(Entry(id=A.id, title="Plan", body="alpha plan, bob's edit\n"))
    _only(bob, "page/guide")
    rep = bob.sync()
    assert _ids(bob) == {G.id}
    assert {d["id"]: d["held"] for d in rep.left_scope} == {A.id: True}
    assert not bob.path(S.id).exists() and bob.held() == {A.id}
    assert "bob's edit" in bob.path(A.id).read_text()
    assert space.live()[A.id].body == "alpha plan\n"
