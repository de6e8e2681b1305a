"""A refusal of the hub names some of a batch's changes: only those are held back, the rest
is published (against the real hub in-process, tests/kit/inproc.py).

The attack (issue 29): after an epoch bump, a replica's snapshot carries no tombstones, so
re-creating a page deleted before the bump looks like a create to the replica's local rule
check, while the hub, which keeps the tombstone, judges it an update. With a rule that
denies editors updates there, the hub refused the whole batch, and the replica built the
same batch again on every sync: none of the member's other edits was ever published."""

from __future__ import annotations

from pathlib import Path

from shared.entry import Entry
from tests.kit.inproc import Space

FROZEN = Entry(id="page/frozen/policy", title="Policy", body="v1\n")
OTHER = Entry(id="page/notes", title="Notes", body="an unrelated edit\n")


def test_a_recreate_the_hub_denies_after_an_epoch_bump_holds_back_only_itself(
        tmp_path: Path, space: Space) -> None:
    admin = space.replica(tmp_path, "admin", "admin")
    try:
        admin.write(FROZEN)
        admin.sync()
        admin.path(FROZEN.id).unlink()  # deleted: the hub keeps its tombstone
        admin.sync()
        assert FROZEN.id not in space.live()
    finally:
        admin.close()
    space.admin.admin_post(f"/v1/spaces/{space.id}/rules", {
        "effect": "deny", "who": "editor", "actions": ["update"],
        "entries": "page/frozen/*"})
    space.bump_epoch("test: history restarts")
    c = space.replica(tmp_path, "c")  # joins after the bump: its snapshot has no tombstone
    try:
        c.sync()
        c.write(Entry(id=FROZEN.id, title="Policy", body="re-created\n"))
        c.write(OTHER)
        for _ in range(2):  # and again at the next sync: never the whole batch
            rep = c.sync()
            assert space.live()[OTHER.id].body == OTHER.body
            assert FROZEN.id not in space.live()
            assert [(d["id"], d["action"]) for d in rep.policy_denied] == [
                (FROZEN.id, "update")], rep.policy_denied
        # kept, not lost: still in the vault and dirty in the store
        assert c.read(FROZEN.id).body == "re-created\n"
        assert FROZEN.id in c.store.dirty_states() and not c.store.outbox()
    finally:
        c.close()


def test_a_quota_refusal_holds_back_only_the_changes_over_quota(
        tmp_path: Path, space: Space) -> None:
    """Before, one new page over the space's entry quota kept every other change of the
    sync back too: an edit of an existing page waited until the new pages were removed."""
    a = space.replica(tmp_path, "a")
    try:
        a.write(Entry(id="page/one", title="One", body="v1\n"))
        a.write(Entry(id="page/two", title="Two", body="v1\n"))
        a.sync()
        space.admin.set_quota(space.id, {"max_entries": 3})  # room for one more page
        a.write(Entry(id="page/one", title="One", body="v2: an edit of a page\n"))
        a.write(Entry(id="page/new-a", title="A", body="new\n"))
        a.write(Entry(id="page/new-b", title="B", body="new\n"))
        rep = a.sync()
        live = space.live()
        assert live["page/one"].body == "v2: an edit of a page\n"  # not held back
        new = {"page/new-a", "page/new-b"}
        assert len(new & set(live)) == 1, sorted(live)  # the room there was, taken
        [held] = rep.policy_denied
        assert held["id"] in new - set(live) and held["rule"] == "quota:entries", held
        assert "quota" in held["message"]
        assert held["id"] in a.store.dirty_states() and a.read(held["id"]) is not None
        rep = a.sync()  # the next sync too: the edit is in, the new page still waits
        assert [d["id"] for d in rep.policy_denied] == [held["id"]]
    finally:
        a.close()
