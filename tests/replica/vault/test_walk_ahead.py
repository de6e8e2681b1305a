"""The vault walk run ahead in a forked child (replica/vault/walk.py ``Prefetch``): it gives
what an inline walk gives, and a walk taken a moment before the sync looks is never read as
a person's delete."""

from __future__ import annotations

import os
from pathlib import Path

from replica.vault import walk as vaultscan
from tests.replica.vault.test_vault import _odd_vault, write


def _problems(ps):
    return [(p.path, p.line, p.reason, p.entry_id) for p in ps]


def test_the_walk_run_ahead_is_the_inline_walk(tmp_path: Path) -> None:
    vault = _odd_vault(tmp_path)
    for i in range(300):
        write(vault, f"page/n{i % 7}/e{i}.md", f"---\ntitle: e{i}\n---\n{i}\n")
    inline = vaultscan.walk(vault)
    walk = vaultscan.Prefetch.start(vault)
    assert walk is not None
    ahead = walk.take()
    assert ahead is not None
    assert ahead[0] == inline[0] and _problems(ahead[1]) == _problems(inline[1])
    # with the odd names the comparison turns into problems; page/notes.txt an attachment
    assert len(ahead[0]) == 307


def test_a_file_created_after_the_walk_is_not_taken_for_a_delete(tmp_path: Path) -> None:
    """Another writer (a sync that held the lock while the walk ran) creates a file and
    records it after the walk: the walk never saw it, the record has it. Without the second
    look (``confirm_missing``) the scan would call it missing: a local delete, published."""
    vault = tmp_path / "v"
    write(vault, "page/a.md", "---\ntitle: a\n---\na\n")
    walked = vaultscan.walk(vault)
    write(vault, "page/b.md", "---\ntitle: b\n---\nb\n")
    st = (vault / "page" / "b.md").stat()
    recorded = [("page/a", None, None), ("page/b", st.st_size, st.st_mtime_ns)]
    ch = vaultscan.scan_changes(vault, recorded, walked)
    assert ch.missing == set()
    (vault / "page" / "b.md").unlink()  # and when it really is gone, it is missing
    assert vaultscan.scan_changes(vault, recorded, walked).missing == {"page/b"}


def test_a_vault_that_is_a_link_to_a_folder_is_walked(tmp_path: Path) -> None:
    """The vault path itself may be a symlink (a person's choice): followed, never read as
    an empty vault (that would be every file deleted)."""
    real = tmp_path / "real"
    write(real, "page/a.md", "---\ntitle: a\n---\na\n")
    os.symlink(real, tmp_path / "v")
    walked = vaultscan.walk(tmp_path / "v")
    assert {w[0] for w in walked[0]} == {"page/a"}


def test_a_failed_walker_leaves_the_walk_to_the_caller(tmp_path: Path, monkeypatch) -> None:
    vault = tmp_path / "v"
    write(vault, "page/a.md", "---\ntitle: a\n---\na\n")

    def broken(_vault):
        raise RuntimeError("the walker dies")

    monkeypatch.setattr(vaultscan, "walk", broken)  # the forked child inherits it
    walk = vaultscan.Prefetch.start(vault)
    assert walk is not None and walk.take() is None


def test_a_walker_not_taken_is_stopped_and_reaped(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    for i in range(2000):
        write(vault, f"page/e{i}.md", "x")
    walk = vaultscan.Prefetch.start(vault)
    assert walk is not None
    pid = walk._pid
    walk.close()
    walk.close()  # idempotent
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"walker {pid} still exists")
