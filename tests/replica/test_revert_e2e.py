"""`quire admin revert`, end to end with a real hub and the real CLI: of a batch with three
entries, one changed since, two are restored and one is reported; the preview changes
nothing; an editor's revert goes through the guard like any publication."""

from __future__ import annotations

import pytest

from shared.entry import make_entry
from tests.replica.conftest import qjson, quire

pytestmark = pytest.mark.e2e


def _page(eid: str, body: str) -> object:
    return make_entry({"id": eid, "title": eid, "body": body})


def test_revert_restores_two_and_reports_the_one_changed_since(team) -> None:  # type: ignore[no-untyped-def]
    alice, bob = team.members("alice", "bob")
    alice.write(_page("page/a", "a1\n"))
    alice.write(_page("page/b", "b1\n"))
    alice.sync()
    # one batch that changes a and b and creates c
    alice.write(_page("page/a", "a2 (bad)\n"))
    alice.write(_page("page/b", "b2 (bad)\n"))
    alice.write(_page("page/c", "c2 (bad)\n"))
    bad_seq = alice.sync()["head"]["seq"]
    assert len(team.batches_by(alice, alice)[-1]["ops"]) == 3
    # bob changes b afterwards
    bob.sync()
    bob.write(_page("page/b", "b3 (bob's fix)\n"))
    bob.sync()

    space = team.space["name"]
    before = team.batches(alice)
    preview = qjson(team.owner, "admin", "revert", space, str(bad_seq), "--dry-run")
    assert {(r["id"], r["action"]) for r in preview["restored"]} == {
        ("page/a", "restore"), ("page/c", "delete")}
    assert [c["id"] for c in preview["conflicts"]] == ["page/b"]
    assert preview["receipt"] is None and team.batches(alice) == before

    done = qjson(team.owner, "admin", "revert", space, str(bad_seq))
    assert done["receipt"]["seq"] == len(before) + 1
    alice.sync()
    assert alice.read("page/a").body == "a1\n"
    assert alice.read("page/c") is None
    assert alice.read("page/b").body == "b3 (bob's fix)\n"
    last = team.batches(alice)[-1]
    assert last["provenance"]["note"] == f"reverts seq {bad_seq}"

    # nothing left to revert: a clear error, nothing published
    again = quire(team.owner, "admin", "revert", space, str(bad_seq), "--json", check=False)
    assert again.returncode != 0 and "invalid_request" in again.stdout
    assert len(team.batches(alice)) == len(before) + 1


def test_a_viewer_cannot_revert(team) -> None:  # type: ignore[no-untyped-def]
    alice = team.member("alice")
    viewer = team.member("vic", role="viewer")
    alice.write(_page("page/a", "a1\n"))
    seq = alice.sync()["head"]["seq"]
    p = quire(viewer.home, "admin", "revert", team.space["name"], str(seq), "--json",
              check=False)
    assert p.returncode != 0 and "forbidden" in p.stdout
    alice.sync()
    assert alice.read("page/a").body == "a1\n"
