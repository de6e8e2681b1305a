"""A running watcher whose vault is moved away (or whose disk is unmounted) publishes no
delete and writes nothing: its syncs fail with ``vault_missing``, paced, and once the folder
is back it carries on (replica/vault/presence.py, docs/replica.md "The vault's presence
file"). Without the presence file (tried: this test then times out with no error), the
watcher made the folder again to write the pulled edit into it, and the next walk of that
folder (a restart, the half-hourly safety walk, a sync without the watcher) finds every
other page gone: a delete of each, published. Real hub, real CLI, real watcher."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.watcher import DEADLINE, WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle, _entry, _has, _team

pytestmark = pytest.mark.e2e


def test_a_watcher_whose_vault_is_moved_away_deletes_nothing_and_resumes(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    ann, bob = team.members("ann", "bob")
    for i in range(3):
        ann.write(_entry(f"page/p{i}", f"page {i}\n"))
    ann.sync()
    bob.sync()
    w = WatchProc(bob)
    try:
        w.wait_ready()
        away = tmp_path / "bob-vault-away"
        bob.vault.rename(away)
        ann.write(_entry("page/p0", "edited by ann\n"))  # a head event the watcher applies
        ann.sync()
        wait_for(lambda: (w.status().get("last_error") or {}).get("code") == "vault_missing",
                 DEADLINE, lambda: str(w.status()))
        assert not bob.vault.exists()  # not made again at the old path
        ann.sync()
        assert all(ann.read(f"page/p{i}") is not None for i in range(3))  # nothing deleted
        assert _has(ann, "page/p0", "edited by ann\n")
        away.rename(bob.vault)  # back: the next paced retry syncs, the edit lands
        wait_for(lambda: _has(bob, "page/p0", "edited by ann\n")
                 and w.status().get("state") == "idle", DEADLINE, lambda: str(w.status()))
        assert {p.name for p in (bob.vault / "page").iterdir()} == {"p0.md", "p1.md", "p2.md"}
    finally:
        assert w.stop() == 0
    ann.sync()
    assert all(ann.read(f"page/p{i}") is not None for i in range(3))


def test_a_vault_removed_and_restored_under_a_watcher_publishes_the_next_edit(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    """``rm -rf`` of the vault, then a copy put back (a new folder, a new inode): the
    watcher's file watch was on the old folder. Before the re-arm (0506cf5) the watcher went
    back to ``idle`` and never saw an edit again: this test timed out waiting for it."""
    import shutil

    team = _team(*shared_hub, tmp_path)
    ann, bob = team.members("ann", "bob")
    ann.write(_entry("page/p0", "page 0\n"))
    ann.sync()
    bob.sync()
    w = WatchProc(bob)
    try:
        w.wait_ready()
        backup = tmp_path / "bob-backup"
        shutil.copytree(bob.vault, backup)
        shutil.rmtree(bob.vault)
        wait_for(lambda: "vault folder is gone" in w.log.read_text(), DEADLINE,
                 lambda: w.log.read_text()[-2000:])
        shutil.copytree(backup, bob.vault)
        wait_for(lambda: "vault folder is back" in w.log.read_text()
                 and w.status().get("journal", {}).get("valid") is True, DEADLINE,
                 lambda: w.log.read_text()[-2000:] + str(w.status()))
        bob.write(_entry("page/p1", "written after the vault came back\n"))
        wait_for(lambda: (ann.sync(), _has(ann, "page/p1",
                                           "written after the vault came back\n"))[1],
                 DEADLINE, lambda: w.log.read_text()[-2000:] + str(w.status()), step=0.5)
    finally:
        assert w.stop() == 0
