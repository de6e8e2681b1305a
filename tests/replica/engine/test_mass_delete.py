"""Mass deletes are held until confirmed (replica/engine/mass_delete.py, docs/replica.md
"Mass deletes"): ``rm -rf vault/*`` on a 200-page space publishes nothing until
``--confirm-deletes``; a delete of 3 pages publishes as usual. Against the real hub
in-process. On 0506cf5 (before the hold) the first sync after the ``rm`` published 200
deletes: the first test failed there with every page gone from the hub."""

from __future__ import annotations

import shutil

import pytest

from replica.engine.mass_delete import Threshold
from shared.entry import Entry
from tests.kit.inproc import Local


def _fill(a: Local, n: int) -> None:
    for i in range(n):
        a.write(Entry(id=f"page/p{i:03}", title=f"p{i}", body=f"page {i}\n"))
    a.sync()


def _rm_pages(r: Local) -> None:
    """``rm -rf vault/*``: every page folder; the hidden presence file stays."""
    for p in r.vault.iterdir():
        if not p.name.startswith("."):
            shutil.rmtree(p)


@pytest.fixture
def pair(tmp_path, space):
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    yield a, b
    a.close()
    b.close()


def test_rm_of_every_page_is_held_until_confirmed(pair, space):
    a, b = pair
    _fill(a, 200)
    b.sync()
    _rm_pages(b)
    b.write(Entry(id="page/new", title="new", body="an edit in the same sync\n"))
    rep = b.sync()
    assert len(space.live()) == 201  # nothing deleted for the team; the edit published
    held = rep.deletes_held
    assert held is not None and held["count"] == 200 and held["of"] == 200
    assert held["reason"] == "more than 50 pages" and len(held["entries"]) == 20
    assert rep.to_json()["deletes_held"] == held
    again = b.sync()  # and the next sync (the watcher's) keeps holding
    assert again.deletes_held is not None and len(space.live()) == 201
    b.engine.confirm_deletes = True
    done = b.sync()
    assert done.deletes_held is None and done.pushed == 200
    assert set(space.live()) == {"page/new"}
    a.sync()
    assert set(a.files()) == {"page/new.md"}


def test_a_delete_of_three_pages_publishes_as_usual(pair, space):
    a, b = pair
    _fill(a, 200)
    b.sync()
    for i in range(3):
        b.path(f"page/p{i:03}").unlink()
    rep = b.sync()
    assert rep.deletes_held is None and rep.pushed == 3
    assert len(space.live()) == 197


def test_files_put_back_leave_nothing_held(pair, space):
    a, b = pair
    _fill(a, 60)
    b.sync()
    saved = {p: p.read_bytes() for p in b.vault.rglob("*.md")}
    _rm_pages(b)
    assert b.sync().deletes_held["count"] == 60
    for p, data in saved.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    rep = b.sync()
    assert rep.deletes_held is None and rep.pushed == 0 and len(space.live()) == 60


@pytest.mark.parametrize(("deletes", "live", "held"), [
    (50, 1000, None), (51, 1000, "more than 50 pages"),
    (3, 8, None),  # a small space: the share counts only above 10 deletes
    (10, 12, None), (11, 40, "more than 25% of the space"), (11, 44, None),
])
def test_the_threshold_table(deletes, live, held):
    assert Threshold().exceeded(deletes, live) == held


def test_the_threshold_is_configurable():
    t = Threshold.from_env({"QUIRE_DELETE_HOLD_PAGES": "5", "QUIRE_DELETE_HOLD_SHARE": "0.5",
                            "QUIRE_DELETE_HOLD_MIN": "2"})
    assert t.exceeded(6, 1000) == "more than 5 pages"
    assert t.exceeded(3, 5) == "more than 50% of the space"
    assert t.exceeded(2, 3) is None
