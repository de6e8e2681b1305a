"""Renames are renames (docs/replica.md "Renames", docs/decisions.md D144), through the real
sync engine and the real hub in-process: a file moved in one vault is published as one
rename (a delete and a put ``from`` it, in one batch), other vaults rename their file, the
hub's history of the new name shows the old one, and an edit made elsewhere to the old name
lands on the new name, in either order, a conflict only where both changed the same lines.
Before, a rename was a delete and an unrelated create: an edit of the old name elsewhere
came back as an edit/delete conflict (or resurrected the old file), and history started
over at the new name."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replica.engine import renames
from replica.engine.mass_delete import Threshold
from shared.entry import Entry
from tests.kit.hostile import Hostile
from tests.kit.inproc import Local, Space

OLD, NEW = "Meeting Notes/Release Plan", "Archive/Release Plan 2026"
BODY = "one\ntwo\nthree\nfour\nfive\n"


@pytest.fixture
def pair(tmp_path: Path, space: Space) -> Iterator[tuple[Local, Local]]:
    ann = space.replica(tmp_path, "ann")
    ann.write(Entry(id=OLD, title="plan", body=BODY))
    assert ann.sync().pushed == 1
    bob = space.replica(tmp_path, "bob")
    bob.sync()
    assert bob.read(OLD) is not None
    try:
        yield ann, bob
    finally:
        ann.close()
        bob.close()


def rename(r: Local, old: str, new: str) -> None:
    dst = r.path(new)
    dst.parent.mkdir(parents=True, exist_ok=True)
    r.path(old).rename(dst)


def edit(r: Local, eid: str, old: str, new: str) -> None:
    e = r.read(eid)
    assert e is not None
    r.write(Entry(id=eid, title=e.title, body=e.body.replace(old, new)))


def history(space: Space, eid: str) -> list[tuple[str, str | None]]:
    doc: dict[str, Any] = space.admin.admin_get(f"/v1/spaces/{space.id}/history", {"id": eid})
    return [(v["id"], v.get("from")) for v in doc["versions"]]


def test_a_moved_file_is_one_rename_everywhere(space: Space, pair: tuple[Local, Local]
                                               ) -> None:
    ann, bob = pair
    rename(ann, OLD, NEW)
    rep = ann.sync()
    assert not rep.problems and not rep.held, rep
    ops = space.batches(ann)[-1]["ops"]
    assert sorted((o["op"], o.get("id") or o["entry"]["id"], o.get("from")) for o in ops) == [
        ("delete", OLD, None), ("put", NEW, OLD)], ops
    inode = bob.path(OLD).stat().st_ino
    rep = bob.sync()
    assert not bob.path(OLD).exists()
    assert bob.path(NEW).stat().st_ino == inode  # the file moved: not removed and rewritten
    assert bob.files() == ann.files() and set(bob.files()) == {f"{NEW}.md"}
    assert [(o["action"], o.get("from")) for c in rep.changes for o in c["ops"]] == [
        ("renamed", OLD)]
    assert history(space, NEW) == [(NEW, OLD), (OLD, None)]
    # renamed back: the old name is a tombstone at the hub, and still a rename
    rename(bob, NEW, OLD)
    bob.sync()
    assert {o.get("from") for o in space.batches(bob)[-1]["ops"]} == {None, NEW}
    assert history(space, OLD) == [(OLD, NEW), (NEW, OLD), (OLD, None)]


@pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                    reason="the e2e (tests/e2e/test_renames_e2e.py) runs this order by default")
def test_an_edit_of_the_old_name_made_after_the_rename_lands_on_the_new_name(
        space: Space, pair: tuple[Local, Local]) -> None:
    """Both sides edit after the rename (different lines): merged on the new name."""
    ann, bob = pair
    rename(ann, OLD, NEW)
    ann.sync()  # the rename is published first
    edit(ann, NEW, "one\n", "ONE (ann)\n")
    ann.sync()
    edit(bob, OLD, "five\n", "FIVE (bob)\n")  # bob has not seen the rename
    rep = bob.sync()
    assert not rep.held, rep
    assert not bob.path(OLD).exists()
    want = "ONE (ann)\ntwo\nthree\nfour\nFIVE (bob)\n"
    assert bob.read(NEW).body == want  # type: ignore[union-attr]
    ann.sync()
    assert ann.files() == bob.files() and set(ann.files()) == {f"{NEW}.md"}
    assert set(space.live()) == {NEW} and space.live()[NEW].body == want
    assert [i for i, _ in history(space, NEW)] == [NEW, NEW, NEW, OLD]


def test_an_edit_published_before_the_rename_is_carried_by_it(
        space: Space, pair: tuple[Local, Local]) -> None:
    """The other order: the edit of the old name lands first, the rename is published
    after (the pull merges the edit into the local rename, which goes out carrying it)."""
    ann, bob = pair
    edit(bob, OLD, "three\n", "THREE (bob)\n")
    bob.sync()  # the edit of the old name is published first
    rename(ann, OLD, NEW)  # ann renamed it before seeing that edit
    rep = ann.sync()
    assert not rep.held, rep
    want = BODY.replace("three\n", "THREE (bob)\n")
    assert not ann.path(OLD).exists() and ann.read(NEW).body == want  # type: ignore[union-attr]
    ops = space.batches(ann)[-1]["ops"]
    assert {o.get("from") for o in ops} == {None, OLD}, ops  # still one rename
    bob.sync()
    assert ann.files() == bob.files() and set(bob.files()) == {f"{NEW}.md"}
    assert history(space, NEW) == [(NEW, OLD), (OLD, None), (OLD, None)]


def test_an_edit_refused_because_its_page_moved_is_retargeted_to_the_new_name(
        tmp_path: Path, space: Space) -> None:
    """Bob's push of an edit of the old name races ann's rename: the rename lands between
    his pull and his push (injected on his push, not by timing), the hub refuses his edit
    (``base_mismatch``), and the pull that follows carries it onto the new name: published
    there, not resurrected under the old name, not lost."""
    ann = space.replica(tmp_path, "ann")
    bob = space.replica(tmp_path, "bob", wrap=Hostile)
    try:
        ann.write(Entry(id=OLD, title="plan", body=BODY))
        ann.sync()
        bob.sync()
        rename(ann, OLD, NEW)

        def rename_lands_first(request: Any, forward: Any) -> Any:
            ann.sync()
            return forward()

        bob.transport.intercept("batches", rename_lands_first, times=1)
        edit(bob, OLD, "four\n", "FOUR (bob)\n")
        rep = bob.sync()
        assert [s.status for s in bob.transport.served if s.kind == "batches"] == [409, 201]
        assert not rep.held and not bob.path(OLD).exists(), rep
        want = BODY.replace("four", "FOUR (bob)")
        assert set(space.live()) == {NEW} and space.live()[NEW].body == want
        ann.sync()
        assert ann.files() == bob.files() == {f"{NEW}.md": bob.path(NEW).read_bytes()}
    finally:
        ann.close()
        bob.close()


def test_conflicts_across_a_rename_are_held_on_the_new_name_with_both_kept(
        space: Space, pair: tuple[Local, Local]) -> None:
    ann, bob = pair
    # the same lines changed on both sides: held on the new name, the old not resurrected
    rename(ann, OLD, NEW)
    ann.sync()
    edit(ann, NEW, "two\n", "TWO (ann)\n")
    ann.sync()
    edit(bob, OLD, "two\n", "TWO (bob)\n")
    rep = bob.sync()
    assert rep.held == [NEW], rep
    assert not bob.path(OLD).exists()
    (c,) = bob.store.conflicts()
    assert (c.entry_id, c.base.body, c.ours.body, c.theirs.body) == (  # type: ignore[union-attr]
        NEW, BODY, BODY.replace("two", "TWO (bob)"), BODY.replace("two", "TWO (ann)"))
    assert set(space.live()) == {NEW}
    # a rename onto a name taken meanwhile: held there, the moved page ours, theirs kept
    ann.write(Entry(id="Notes/b", title="b", body="ann's b\n"))
    ann.sync()
    bob.write(Entry(id="Archive/b", title="bob's", body="bob's own page\n"))
    bob.sync()
    rename(ann, "Notes/b", "Archive/b")
    rep = ann.sync()
    assert rep.held == ["Archive/b"], rep
    (c,) = ann.store.conflicts()
    assert (c.ours.body, c.theirs.body) == ("ann's b\n", "bob's own page\n")  # type: ignore[union-attr]
    assert space.live()["Archive/b"].body == "bob's own page\n"


def test_renaming_a_folder_of_many_pages_is_not_held_as_a_mass_delete(
        space: Space, pair: tuple[Local, Local]) -> None:
    ann, bob = pair
    ann.engine.delete_threshold = Threshold(pages=3)  # 6 deletes would be held
    for i in range(6):
        ann.write(Entry(id=f"Team/p{i}", title=f"p{i}", body=f"page {i}\n"))
    ann.sync()
    (ann.vault / "Team").rename(ann.vault / "Crew")
    rep = ann.sync()
    assert rep.deletes_held is None, rep.deletes_held
    crew = {f"Crew/p{i}" for i in range(6)}
    assert set(space.live()) == crew | {OLD}
    assert {o.get("from") for o in space.batches(ann)[-1]["ops"]} == {
        None} | {f"Team/p{i}" for i in range(6)}
    bob.sync()
    assert {p for p in bob.files() if p.startswith("Crew/")} == {f"{c}.md" for c in crew}
    assert not any(p.startswith("Team/") for p in bob.files())


def test_renaming_a_guardrail_out_of_its_folder_publishes_neither_half(
        space: Space, pair: tuple[Local, Local]) -> None:
    """The attack: an editor moves ``guardrail/no-force.md`` to ``Archive/``, where it is a
    page. The delete of the guardrail is refused (default rule); the rename's create is
    kept back with it, so no weakened copy is published beside the guardrail."""
    ann, bob = pair
    owner = space.replica(ann.root, "owner", role="admin")
    try:
        owner.sync()
        owner.write(Entry(id="guardrail/no-force", title="no force push",
                          body="never force-push main\n", meta={"severity": "block"}))
        owner.sync()
        bob.sync()
        rename(bob, "guardrail/no-force", "Archive/no-force")
        before = space.head()["seq"]
        rep = bob.sync()
        held = {d["id"]: d["rule"] for d in rep.policy_denied}
        assert held == {"guardrail/no-force": "default:guardrails-additive",
                        "Archive/no-force": "rename"}, rep.policy_denied
        assert space.head()["seq"] == before  # nothing published
        assert "Archive/no-force" not in space.live() and "guardrail/no-force" in space.live()
    finally:
        owner.close()


def test_a_rename_whose_delete_the_hub_refuses_is_held_whole(tmp_path: Path, space: Space
                                                              ) -> None:
    """When the hub refuses the delete of a rename (rules the local check did not know), the
    put ``from`` it is held back with it, not sent alone in the next batch."""
    from shared.entry import tombstone
    from shared.errors import PolicyDenied
    from shared.wire import Op

    ann = space.replica(tmp_path, "ann")
    put = Op(Entry(id=NEW, title="plan", body=BODY), None, moved_from=OLD)
    batch = type("B", (), {"ops": (Op(tombstone(OLD), "0" * 64), put)})()
    e = PolicyDenied("refused", {"denied": [{"id": OLD, "action": "delete", "rule": "r1",
                                             "reason": "no"}]})
    pub = ann.engine.publisher
    try:
        assert pub.hub_refused(batch, e)  # type: ignore[arg-type]
        assert {k: v["rule"] for k, v in pub.refused.items()} == {OLD: "r1", NEW: "rename"}
    finally:
        ann.close()


def test_pairing_takes_one_create_per_delete_of_the_same_content_only() -> None:
    """git's exact-rename rule: equal content but for the id; one create per delete, lowest
    ids first; an update, an edited copy or a second copy stays what it is."""
    from shared.entry import tombstone
    from shared.wire import Op

    def e(eid: str, body: str = "same\n") -> Entry:
        return Entry(id=eid, title="t", body=body)

    gone = {"a/x": e("a/x"), "a/y": e("a/y", "other\n")}
    ops = [Op(tombstone("a/x"), "0" * 64), Op(tombstone("a/y"), "1" * 64),
           Op(e("b/x2"), None), Op(e("b/x1"), None),  # two copies: the lower id pairs
           Op(e("b/y", "other, edited\n"), None),  # edited: a create
           Op(e("c/z"), "2" * 64)]  # an update: never a rename
    got = {op.entry_id: op.moved_from for op in renames.pair(ops, gone)}
    assert got == {"a/x": None, "a/y": None, "b/x1": "a/x", "b/x2": None, "b/y": None,
                   "c/z": None}
    assert [op.entry_id for op in renames.pair(ops, gone)] == [op.entry_id for op in ops]


@pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                    reason="attachments take the pages' path here; kept for the long run")
def test_an_attachment_moved_to_another_folder_is_one_rename(
        space: Space, pair: tuple[Local, Local]) -> None:
    """An attachment (D147) moved between folders keeps its content (its title is its file
    name): one rename, and the other vault has the same bytes at the new path only."""
    ann, bob = pair
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    (ann.vault / "img").mkdir()
    (ann.vault / "img" / "chart.png").write_bytes(png)
    ann.sync()
    bob.sync()
    assert (bob.vault / "img" / "chart.png").read_bytes() == png
    (ann.vault / "assets").mkdir()
    (ann.vault / "img" / "chart.png").rename(ann.vault / "assets" / "chart.png")
    rep = ann.sync()
    assert not rep.problems and not rep.held, rep
    ops = space.batches(ann)[-1]["ops"]
    assert {o.get("from") for o in ops} == {None, "img/chart.png"}, ops
    bob.sync()
    assert (bob.vault / "assets" / "chart.png").read_bytes() == png
    assert not (bob.vault / "img" / "chart.png").exists()
    assert history(space, "assets/chart.png") == [("assets/chart.png", "img/chart.png"),
                                                  ("img/chart.png", None)]
