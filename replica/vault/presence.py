"""Is the vault there? A folder that is gone, moved or not mounted must never read as
"every page deleted by hand" (docs/decisions.md, "The vault's presence file").

A vault holds a hidden file, ``.quire-vault`` (scans skip hidden files), put there by the
first sync, the clone or the first sync after an upgrade. Every run that writes to the vault
or reads edits from it checks it first (the engine's ``Ledger.flush_vault`` and
``fold_vault``, the first two steps of every sync and of the conflict desk's look):

    .quire-vault there                     ─► go on (one stat)
    not there, no file recorded            ─► a new vault: make the folder and the file
    not there, a recorded file is there    ─► the file was lost, or the vault is older than
                                              it: put it back, go on
    not there, no recorded file is there   ─► refuse: ``vault_missing``, nothing changed
                                              (no delete published, nothing written)

Syncthing refuses a folder without its ``.stfolder`` for the same reason: an unmounted disk
leaves an empty mount point, and an empty folder synced as it is deletes everything
everywhere. A person who does mean to delete every page makes the file again
(``touch <vault>/.quire-vault``) and syncs: the deletes are then theirs, recorded in the
history like any other (``quire revert`` brings pages back).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from replica.store import store as st
from replica.vault.markdown import entry_os_path
from shared.errors import VaultMissing

PRESENCE_FILE = ".quire-vault"
TEXT = (
    "This folder is a Quire vault. While this file is missing and none of the space's pages\n"
    "are here, `quire sync` and `quire watch` refuse to run (vault_missing) instead of\n"
    "publishing every page as deleted: a moved folder or an unmounted disk deletes nothing.\n"
    "Keep it; it holds nothing secret.\n"
)


def missing(vault: Path, store: Any) -> VaultMissing | None:
    """What ``check`` would raise, without making anything (``quire status``)."""
    if os.path.isfile(os.path.join(os.fspath(vault), PRESENCE_FILE)):
        return None
    return _refusal(vault, store)


def _refusal(vault: Path, store: Any) -> VaultMissing | None:
    marker = os.path.join(os.fspath(vault), PRESENCE_FILE)
    with store.engine.connect() as conn:
        recorded = on_disk_txn(conn)
    if recorded and not _any_there(vault, recorded):
        return VaultMissing(
            f"the vault {vault} holds none of the space's {len(recorded)} recorded pages and no"
            f" {PRESENCE_FILE}: if the folder was moved or its disk is not mounted, put it"
            f" back; if it is lost, write it again from the store (quire vault rebuild);"
            f" to delete every page of the space, create {marker} and sync again",
            {"vault": str(vault), "recorded": len(recorded), "presence_file": marker})
    return None


def check(vault: Path, store: Any) -> None:
    """Raise ``VaultMissing`` when the vault is gone (see the module docstring); else make
    sure the vault and its presence file exist. ``store``: the space's ``Store``."""
    marker = os.path.join(os.fspath(vault), PRESENCE_FILE)
    if os.path.isfile(marker):
        return
    refusal = _refusal(vault, store)
    if refusal is not None:
        raise refusal
    _make(vault, marker)


def make(vault: Path) -> None:
    """Make the vault folder and its presence file (``quire vault rebuild``: the store is
    writing the pages back, so the folder is the vault again)."""
    marker = os.path.join(os.fspath(vault), PRESENCE_FILE)
    if not os.path.isfile(marker):
        _make(vault, marker)


def on_disk_txn(conn: Any) -> list[str]:
    """The entries whose file the store believes is in the vault: recorded with its stat,
    or about to be overwritten by a journaled write. (An entry whose first file is still a
    journaled write has a file hash but no stat yet: a vault that never held it lost
    nothing.)"""
    ids = {entry_id for entry_id, size, _mtime in st.file_index_txn(conn) if size is not None}
    ids.update(entry_id for entry_id, _content, prev_hash in st.pending_vault_writes_txn(conn)
               if prev_hash is not None)
    return sorted(ids)


def _any_there(vault: Path, recorded: list[str]) -> bool:
    """Is any recorded page's file in the vault? (Stops at the first: a vault that is there
    answers at once; a missing one costs a failed stat per recorded page.)"""
    if not vault.is_dir():
        return False
    base = os.fspath(vault)
    for entry_id in recorded:
        try:
            os.lstat(entry_os_path(base, entry_id))
        except OSError:
            continue
        return True
    return False


def _make(vault: Path, marker: str) -> None:
    vault.mkdir(parents=True, exist_ok=True)
    tmp = marker + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, TEXT.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, marker)
