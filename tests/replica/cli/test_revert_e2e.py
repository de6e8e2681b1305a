"""`quire admin revert`, end to end with a real hub and the real CLI: of a batch with three
entries, one changed since, two are restored and one is reported; the preview changes
nothing; an editor's revert goes through the guard like any publication."""

from __future__ import annotations

import pytest

from replica.hubclient.client import HubClient
from replica.machine.home import Home
from shared.entry import make_entry
from shared.errors import Forbidden, InvalidRequest
from tests.kit.cli import device_auth, qjson, quire

pytestmark = pytest.mark.e2e


def _page(eid: str, body: str) -> object:
    return make_entry({"id": eid, "title": eid, "body": body})


def _owner(team) -> HubClient:  # type: ignore[no-untyped-def]
    h = Home(team.owner).hubs()[0]
    return HubClient(h.url, auth=device_auth(h), hub_key=h.public_key)


def _written(batches: list[dict[str, object]]) -> set[str]:
    """The entry versions ``batches`` wrote."""
    return {make_entry(o["entry"]).version for b in batches for o in b["ops"]  # type: ignore[attr-defined]
            if o.get("op") == "put"}


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


def test_an_editors_revert_with_block_is_refused_before_anything_is_published(team) -> None:  # type: ignore[no-untyped-def]
    """Blocking is for space admins: an editor's ``--block`` is refused up front. Before,
    the revert was published and only then was the block refused (``forbidden``, exit 5,
    with the revert already in the history)."""
    alice = team.member("alice")
    alice.write(_page("page/a", "a1\n"))
    alice.sync()
    alice.write(_page("page/a", "a2 (bad)\n"))
    bad_seq = alice.sync()["head"]["seq"]
    before = team.batches(alice)
    p = quire(alice.home, "admin", "revert", team.space["name"], str(bad_seq), "--block",
              "--json", check=False)
    assert p.returncode == 5 and "forbidden" in p.stdout, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert team.batches(alice) == before  # nothing published
    # without --block the editor's revert goes through the guard as before
    done = qjson(alice.home, "admin", "revert", team.space["name"], str(bad_seq))
    assert done["receipt"]["seq"] == len(before) + 1


def test_block_keeps_the_reverted_version_from_returning(team) -> None:  # type: ignore[no-untyped-def]
    """``--block``: bob pulled the bad version and writes it back after the revert (an
    agent re-applying what it remembers); carol was offline with the same bad content as
    an unpublished edit. Both end with it held as a conflict, kept in their vaults, and
    the hub's content stays reverted."""
    alice, bob, carol = team.members("alice", "bob", "carol")
    alice.write(_page("page/a", "a1\n"))
    alice.write(_page("page/b", "b1\n"))
    alice.sync()
    carol.sync()  # then offline
    bob.sync()
    bad = _page("page/a", "a2 (bad)\n")
    alice.write(bad)
    alice.write(_page("page/b", "b2 (bad)\n"))
    bad_seq = alice.sync()["head"]["seq"]
    bob.sync()
    assert bob.read("page/a").body == "a2 (bad)\n"

    space = team.space["name"]
    preview = qjson(team.owner, "admin", "revert", space, str(bad_seq), "--block",
                    "--dry-run")
    assert {(b["id"], b["version"]) for b in preview["blocked"]} == {
        ("page/a", bad.version), ("page/b", _page("page/b", "b2 (bad)\n").version)}
    with alice.client() as c:
        assert c.admin_get(f"/v1/spaces/{team.space['id']}/blocks")["blocks"] == []
    done = qjson(team.owner, "admin", "revert", space, str(bad_seq), "--block")
    assert done["receipt"] is not None and len(done["blocked"]) == 2
    with _owner(team) as c:
        events = [e for e in c.audit(team.space["id"]) if e["action"] == "version.block"]
    assert len(events) == 1 and events[0]["details"]["seq"] == bad_seq

    # bob: pulls the revert, then writes the bad version back and syncs
    bob.sync()
    assert bob.read("page/a").body == "a1\n"
    bob.write(bad)
    r = bob.sync(check=False)
    assert [b["id"] for b in r["sync"]["version_blocked"]] == ["page/a"]
    assert "page/a" in r["sync"]["held"]
    assert bob.read("page/a").body == "a2 (bad)\n"  # kept, with the marker saying why
    assert "blocked" in bob.path("page/a").read_text()
    # carol: offline with the bad content as an unpublished edit
    carol.write(bad)
    r = carol.sync(check=False)
    assert [b["id"] for b in r["sync"]["version_blocked"]] == ["page/a"]
    assert carol.read("page/a").body == "a2 (bad)\n"
    assert [c["entry"] for c in carol.status()["conflicts"]] == ["page/a"]
    alice.sync()
    assert alice.read("page/a").body == "a1\n"  # the hub stays reverted
    assert bad.version not in _written(team.batches(alice)[bad_seq:])
    # a second sync does not republish bob's held edit either
    bob.sync(check=False)
    alice.sync()
    assert alice.read("page/a").body == "a1\n"


def test_blocks_take_checked_input_from_admins_only(team) -> None:  # type: ignore[no-untyped-def]
    alice = team.member("alice")
    alice.write(_page("page/a", "a1\n"))
    seq = alice.sync()["head"]["seq"]
    path = f"/v1/spaces/{team.space['id']}/blocks"
    ok = {"seq": seq, "versions": [{"id": "page/a", "version": "0" * 64}]}
    with alice.client() as c:  # an editor
        with pytest.raises(Forbidden):
            c.admin_post(path, ok)
    with _owner(team) as c:
        for bad in ({"seq": 0, "versions": ok["versions"]}, {"seq": seq, "versions": []},
                    {"seq": seq, "versions": [{"id": "page/a", "version": "xyz"}]},
                    {"seq": seq + 5, "versions": ok["versions"]}):
            with pytest.raises(InvalidRequest):
                c.admin_post(path, bad)
        assert c.admin_get(path)["blocks"] == []
