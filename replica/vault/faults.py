"""Vault faults a sync must survive without touching other entries (docs/decisions.md,
"Vault faults are local"): a folder
that is a symlink (never written through, its entries left alone and reported), and files a
refused transaction created (removed again, so the vault is as it was)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from replica.vault import markdown as md
from shared.entry import EntryError


def behind_link(vault: Path, path: Path) -> bool:
    """Is a folder between the vault and ``path`` a symlink? (Not followed: a sync leaves
    the entries under it alone and reports them.)"""
    d = path.parent
    while d != vault and vault in d.parents:
        if d.is_symlink():
            return True
        d = d.parent
    return False


def remove_created(created: list[tuple[str, bytes]]) -> None:
    """Undo files a refused transaction created (exclusively, in an empty spot): each is
    removed only while it still holds exactly what was written."""
    for path, data in created:
        try:
            if not os.path.islink(path) and Path(path).read_bytes() == data:
                os.unlink(path)
        except OSError:
            continue


def blocked(scan: Any, entry_id: str) -> bool:
    """Is the entry's file unreachable for a reason that is not its own (under a folder that
    is a symlink or cannot be read, as a vault scan reports)? Its absence is then no
    deletion."""
    rel = entry_id + ".md"
    return entry_id in scan.problem_ids() or any(
        p.entry_id is None and rel.startswith(p.path + "/") for p in scan.problems)


def adopt_file_txn(conn: Conn, vault: Path, entry_id: str, path: str) -> None:
    """A file that appeared at an entry's path while a clone was writing it: read now as
    the local create it is (when it parses), so the hub's version merges against it (a
    ``create`` conflict when they differ) instead of being recorded as local."""
    try:
        data = Path(path).read_bytes()
        entry = md.read_entry(vault, entry_id, data)[0]
    except (OSError, EntryError):
        return  # not readable or not parseable yet: the scan merges it once it is
    s = st.get_state_txn(conn, entry_id)
    if s.local is None:
        s.local = entry
        s.file_hash = s.shown_hash = md.file_hash(data)
        s.file_base = entry
        st.put_state_txn(conn, s)
