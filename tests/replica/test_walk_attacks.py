"""Attacks on the vault walk by folder descriptor and the walk run ahead (replica/vaultscan.py):
the walk must see every entry file whatever the tree's shape and whatever happens during it,
and must never leave descriptors behind."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from replica import vaultscan
from shared.entry import Entry
from tests.replica.conftest import Team
from tests.replica.test_vault import write


@contextlib.contextmanager
def fd_limit(soft: int) -> Iterator[None]:
    """RLIMIT_NOFILE lowered to ``soft`` (1024: the usual Linux default; 256: macOS's), for
    this process and the processes it starts meanwhile."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def wide(vault: Path, n: int) -> None:
    """``page/f<i>/e.md`` for i < n: one kind folder with n subfolders (a folder a project,
    a day, a person ...)."""
    for i in range(n):
        write(vault, f"page/f{i}/e.md", f"---\ntitle: e{i}\n---\n{i}\n")


def test_a_wide_folder_is_walked_whole_under_the_usual_fd_limit(tmp_path: Path) -> None:
    """The walk opens every subfolder of a folder when it lists it and keeps the descriptors
    until it gets to them: a folder with more subfolders than the descriptor limit leaves the
    rest "cannot be read" (EMFILE), on every walk, so their edits are never seen."""
    vault = tmp_path / "v"
    wide(vault, 1100)
    with fd_limit(1024):
        walked, problems = vaultscan.walk(vault)
    assert problems == []
    assert len(walked) == 1100


def test_the_walk_holds_few_descriptors_on_a_wide_tree(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    wide(vault, 300)
    with fd_limit(len(open_fds()) + 64):
        walked, problems = vaultscan.walk(vault)
    assert problems == [] and len(walked) == 300


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_file_gone_during_the_walk_leaks_no_descriptor(tmp_path: Path,
                                                          monkeypatch) -> None:
    """A file deleted between the folder's listing and its lstat (a person deleting it while
    the walk runs): the walk must neither fail (the old walk did too) nor leave the pending
    folders' descriptors open (a ``quire watch`` or MCP server walks again and again)."""
    vault = tmp_path / "v"
    wide(vault, 50)
    write(vault, "page/x/gone.md", "x")
    real = os.scandir

    def listing_then_delete(path=None):
        it = real(path)
        entries = list(it)
        it.close()
        if any(de.name == "gone.md" for de in entries):
            (vault / "page" / "x" / "gone.md").unlink(missing_ok=True)
        return contextlib.nullcontext(iter(entries))

    monkeypatch.setattr(vaultscan.os, "scandir", listing_then_delete)
    before = open_fds()
    walked: set[tuple[str, int, int]] | None = None
    problems: list = []
    with contextlib.suppress(FileNotFoundError):
        walked, problems = vaultscan.walk(vault)
    monkeypatch.undo()
    leaked = open_fds() - before
    assert not leaked, f"{len(leaked)} descriptors left open"
    assert walked is not None, "a file deleted during the walk failed the whole walk"
    assert {w[0] for w in walked} == {f"page/f{i}/e" for i in range(50)} and problems == []


def test_a_wide_vault_syncs_every_entry_under_the_usual_fd_limit(team: Team) -> None:
    """End to end, real CLI: 1100 entries one a folder, created and synced under a soft
    limit of 1024 descriptors (a login shell's usual ``ulimit -n``). Every one must be
    published, and no folder reported unreadable; else the same folders are skipped by
    every sync and their entries never go out."""
    a = team.member("a")
    for i in range(1100):
        a.write(Entry(id=f"page/f{i}/e", title=f"e{i}", body=f"{i}\n"))
    with fd_limit(1024):
        first = a.sync()
        second = a.sync()
    assert first["sync"]["pushed"] + second["sync"]["pushed"] == 1100
    assert [p["reason"] for p in first["sync"]["problems"]][:1] == []
    assert second["sync"]["problems"] == []
