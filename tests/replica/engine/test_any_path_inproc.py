"""Any Markdown path is an entry (docs/decisions.md D132 part 1, D139), through the real
sync engine and the real hub in-process: names people keep (spaces, upper case, accents,
a file at the root, nested folders) are published, cloned and pulled to the same paths,
and their edits and deletes travel back. Before, each of these files stayed in
``problems`` for good. A name that is one file with another entry's on macOS and Windows is
kept back, named, with a name that would do (tests/hub/test_name_collisions.py: the hub)."""

from __future__ import annotations

from pathlib import Path

from shared.entry import Entry
from tests.kit.inproc import Space

NAMES = ["Meeting Notes/Release Plan", "café-notes", "README", "Projects/Q3/Road Map",
         "page/deploy", "日本語/メモ"]


def test_people_names_sync_to_the_same_paths_both_ways(tmp_path: Path, space: Space) -> None:
    ann = space.replica(tmp_path / "a", "ann")
    bob = None
    try:
        for eid in NAMES:
            ann.write(Entry(id=eid, title=eid, body=f"{eid}\n"))
        rep = ann.sync()
        assert rep.pushed == len(NAMES) and not rep.problems, rep
        assert set(space.live()) == set(NAMES)
        bob = space.replica(tmp_path / "b", "bob")
        bob.sync()
        assert bob.files() == ann.files()
        assert (bob.vault / "Meeting Notes" / "Release Plan.md").is_file()
        assert (bob.vault / "README.md").is_file()
        # an edit of a root file and a delete in a folder with a space travel back
        bob.write(Entry(id="README", title="README", body="edited by bob\n"))
        bob.path("Meeting Notes/Release Plan").unlink()
        bob.sync()
        ann.sync()
        assert ann.read("README").body == "edited by bob\n"  # type: ignore[union-attr]
        assert not ann.path("Meeting Notes/Release Plan").exists()
        assert ann.files() == bob.files()
    finally:
        ann.close()
        if bob is not None:
            bob.close()


def test_the_replica_keeps_a_colliding_file_back_and_publishes_the_rest(
        tmp_path: Path, space: Space) -> None:
    ann = space.replica(tmp_path, "ann")
    try:
        ann.write(Entry(id="Notes/Plan", title="plan", body="v1\n"))
        assert ann.sync().pushed == 1
        for eid in ("notes/plan", "NOTES/other", "Notes/fine"):
            ann.write(Entry(id=eid, title=eid, body="x\n"))
        rep = ann.sync()
        held = {d["id"]: d for d in rep.policy_denied}
        assert set(held) == {"notes/plan", "NOTES/other"}, rep.policy_denied
        assert held["notes/plan"]["rule"] == "name_collision"
        assert held["notes/plan"]["of"] == "Notes/Plan"
        assert held["NOTES/other"]["suggested"] == "Notes/other"  # the folder's spelling
        assert "notes/plan.md" in held["notes/plan"]["message"]
        assert set(space.live()) == {"Notes/Plan", "Notes/fine"}  # nothing else published
        assert ann.path("notes/plan").exists()  # nothing lost
    finally:
        ann.close()


def test_a_guardrail_kept_by_front_matter_cannot_be_shadowed_from_guardrail(
        tmp_path: Path, space: Space) -> None:
    """The local check finds the holders of a key among guardrails in any folder
    (``synced_guardrails_txn``): a new ``guardrail/…`` taking the key of ``Rules/…`` is
    judged as an update of it and kept back, as the hub would refuse it."""
    admin = space.replica(tmp_path / "a", "admin", "admin")
    mallory = space.replica(tmp_path / "m", "mallory")
    try:
        admin.write(Entry(id="Rules/no-force-push", title="no force push",
                          body="Never force-push to main.\n",
                          meta={"kind": "guardrail", "severity": "block"}))
        admin.sync()
        mallory.sync()
        mallory.write(Entry(id="guardrail/aaa-ci", title="no force push",
                            body="Force-pushing is fine.\n",
                            meta={"severity": "block", "key": "Rules/no-force-push"}))
        rep = mallory.sync()
        assert [(d["id"], d["rule"]) for d in rep.policy_denied] == [
            ("guardrail/aaa-ci", "default:guardrails-additive")], rep.policy_denied
        msg = rep.policy_denied[0]["message"]
        assert "takes the key Rules/no-force-push" in msg
        assert "the hub refused" not in msg  # kept back before pushing, not after
        assert set(space.live()) == {"Rules/no-force-push"}
    finally:
        admin.close()
        mallory.close()
