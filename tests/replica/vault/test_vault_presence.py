"""A vault that is gone is refused, never synced as "every page deleted" (replica/
vault_presence.py), on the real hub in-process. Each attack below published a delete of every
page before the presence file: a vault folder moved away, an unmounted disk (an empty mount
point), a pull's vault writes into a folder that is gone. What must still work: deleting
every page on purpose, a vault from before the presence file, a new replica."""

from __future__ import annotations

import os
import shutil

import pytest

from replica.vault.presence import PRESENCE_FILE
from shared.entry import Entry
from shared.errors import VaultMissing

PAGES = [Entry(id=f"page/p{i}", title=f"P{i}", body=f"page {i}\n") for i in range(3)]


def _synced_pair(space, tmp_path):
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    for e in PAGES:
        a.write(e)
    a.sync()
    b.sync()
    assert set(space.live()) == {e.id for e in PAGES}
    return a, b


def _unchanged(space, b, seq: int) -> None:
    assert space.head()["seq"] == seq  # nothing published
    assert set(space.live()) == {e.id for e in PAGES}
    b.sync()
    assert all(b.read(e.id) == e for e in PAGES)  # the other vault keeps every page


def test_a_new_replica_gets_its_vault_and_presence_file(space, tmp_path):
    a = space.replica(tmp_path, "a")
    assert not a.vault.exists()
    a.sync()
    assert (a.vault / PRESENCE_FILE).is_file()


def test_a_vault_moved_away_is_refused_and_nothing_is_deleted(space, tmp_path):
    a, b = _synced_pair(space, tmp_path)
    seq = space.head()["seq"]
    a.vault.rename(tmp_path / "moved")
    with pytest.raises(VaultMissing) as e:
        a.sync()
    assert e.value.code == "vault_missing" and e.value.details["recorded"] == len(PAGES)
    assert not a.vault.exists()  # not made again
    _unchanged(space, b, seq)
    (tmp_path / "moved").rename(a.vault)  # put back: syncs as before
    a.write(Entry(id="page/p0", title="P0", body="edited\n"))
    a.sync()
    assert space.live()["page/p0"].body == "edited\n" and len(space.live()) == len(PAGES)


def test_an_empty_mount_point_is_refused(space, tmp_path):
    a, b = _synced_pair(space, tmp_path)
    seq = space.head()["seq"]
    disk = tmp_path / "disk"
    a.vault.rename(disk)  # the disk is unmounted: an empty folder where the vault was
    a.vault.mkdir()
    with pytest.raises(VaultMissing):
        a.sync()
    assert os.listdir(a.vault) == []  # nothing written into the mount point
    _unchanged(space, b, seq)


def test_a_pull_is_not_written_into_a_vault_that_is_gone(space, tmp_path):
    a, b = _synced_pair(space, tmp_path)
    b.write(Entry(id="page/new", title="New", body="from b\n"))
    b.sync()
    a.vault.rename(tmp_path / "moved")
    with pytest.raises(VaultMissing):
        a.engine.flush_vault()  # what the watcher's fast path runs after applying a pull
    with pytest.raises(VaultMissing):
        a.sync()
    assert not a.vault.exists()
    assert "page/new" in space.live() and len(space.live()) == len(PAGES) + 1
    (tmp_path / "moved").rename(a.vault)
    a.sync()
    assert a.read("page/new").body == "from b\n"


def test_deleting_every_page_on_purpose_is_published(space, tmp_path):
    a, b = _synced_pair(space, tmp_path)
    for e in PAGES:  # the files go, the vault and its presence file stay
        a.path(e.id).unlink()
    a.sync()
    assert space.live() == {}
    b.sync()
    assert all(b.read(e.id) is None for e in PAGES)


def test_a_whole_vault_deleted_on_purpose_is_published_once_the_file_is_made(space, tmp_path):
    a, _b = _synced_pair(space, tmp_path)
    shutil.rmtree(a.vault)
    with pytest.raises(VaultMissing) as e:
        a.sync()
    marker = e.value.details["presence_file"]  # what the message tells a person to make
    os.makedirs(a.vault)
    open(marker, "w").close()
    a.sync()
    assert space.live() == {}


def test_a_vault_from_before_the_presence_file_gets_one_and_loses_nothing(space, tmp_path):
    a, b = _synced_pair(space, tmp_path)
    seq = space.head()["seq"]
    (a.vault / PRESENCE_FILE).unlink()  # a replica synced by an older quire
    a.sync()
    assert (a.vault / PRESENCE_FILE).is_file()
    _unchanged(space, b, seq)
