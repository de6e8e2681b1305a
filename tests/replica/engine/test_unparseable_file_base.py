"""A vault file that did not parse while a remote change arrived: when the person fixes it,
their edit is merged three-way against what the file showed, never pushed over the remote
change they never saw (store column ``file_base``)."""

from __future__ import annotations

import sqlite3

import pytest

from replica.store.store import Store
from shared.entry import Entry
from tests.kit.inproc import Local

PAGE = Entry(id="page/deploy", title="Deploy", body="one\ntwo\nthree\nfour\nfive\n")
BROKEN = b"---\ntitle: [oops\n---\nmine\n"


@pytest.fixture
def pair(tmp_path, space):
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    yield a, b
    a.close()
    b.close()


def _remote_change_while_broken(a: Local, b: Local, remote_body: str) -> None:
    a.write(PAGE)
    for _ in range(2):
        a.sync()
        b.sync()
    b.path(PAGE.id).write_bytes(BROKEN)
    a.write(Entry(id=PAGE.id, title="Deploy", body=remote_body))
    a.sync()
    rep = b.sync()  # the remote change reaches b's store, not its (broken) file
    assert [p.path for p in rep.problems] == ["page/deploy.md"]
    assert b.path(PAGE.id).read_bytes() == BROKEN


def test_fixing_a_broken_file_does_not_overwrite_the_remote_change_it_never_saw(pair, space):
    a, b = pair
    _remote_change_while_broken(a, b, "ONE\ntwo\nthree\nfour\nfive\n")
    # the person fixes the file with an edit of the version it showed (non-overlapping)
    b.write(Entry(id=PAGE.id, title="Deploy", body="one\ntwo\nthree\nfour\nFIVE\n"))
    rep = b.sync()
    assert PAGE.id in rep.merged and not b.held()
    assert space.live()[PAGE.id].body == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert b.read(PAGE.id).body == "ONE\ntwo\nthree\nfour\nFIVE\n"
    a.sync()
    assert a.files() == b.files() and a.store.digest() == b.store.digest()


def test_fixing_a_broken_file_with_an_overlapping_edit_is_held_not_pushed(pair, space):
    a, b = pair
    _remote_change_while_broken(a, b, "uno\ntwo\nthree\nfour\nfive\n")
    batches = len(space.batches())
    b.write(Entry(id=PAGE.id, title="Deploy", body="eins\ntwo\nthree\nfour\nfive\n"))
    rep = b.sync()
    assert rep.held == [PAGE.id] and b.held() == {PAGE.id}
    assert len(space.batches()) == batches and space.live()[PAGE.id].body.startswith("uno")
    # nothing lost: the person's edit stays in the vault (marked), all three are kept
    text = b.path(PAGE.id).read_text()
    assert "eins" in text and "quire:" in text
    c = b.store.conflicts()[0]
    assert c.base.body.startswith("one") and c.ours.body.startswith("eins")
    assert c.theirs.body.startswith("uno")
    # resolving by hand publishes against the hub's version
    b.write(Entry(id=PAGE.id, title="Deploy", body="uno eins\ntwo\nthree\nfour\nfive\n"))
    b.sync()
    assert not b.held() and space.live()[PAGE.id].body.startswith("uno eins")


def test_fixing_a_broken_file_unchanged_takes_the_remote_change(pair, space):
    a, b = pair
    _remote_change_while_broken(a, b, "ONE\ntwo\nthree\nfour\nfive\n")
    b.write(PAGE)  # back to what it showed, no edit
    b.sync()
    assert space.live()[PAGE.id].body.startswith("ONE") and len(space.batches()) == 2
    assert b.read(PAGE.id).body.startswith("ONE")


def test_store_without_file_base_column_is_upgraded_in_place(tmp_path):
    path = tmp_path / "store.sqlite"
    Store(path).close()
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE entries DROP COLUMN file_base")
    con.execute("INSERT INTO entries (id, local, file_hash, held) VALUES "
                "('page/x', NULL, 'h', 0)")
    con.commit()
    con.close()
    store = Store(path)
    try:
        assert store.states()["page/x"].file_base is None
        assert store.states()["page/x"].file_hash == "h"
    finally:
        store.close()
