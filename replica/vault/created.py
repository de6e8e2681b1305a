"""The files a clone creates in empty spots of the vault, created in place (no temp file,
no rename), and the repair of those a crash left unfinished (docs/decisions.md, "Clone on
both cores").

A snapshot's new files are not recorded anywhere until the snapshot's transaction commits,
after one flush of the vault's file system. Before that, a crash (a kill, or a power cut
that loses the page cache) can leave any of them missing, empty, cut short or whole. So
that the next sync never mistakes one for a person's file (and publishes a cut entry as an
edit), each new file carries two marks of this clone:

    mark_txn (own commit, before the first file)     meta: {"mtime_ns": M}
    create:  open(O_CREAT | O_EXCL, mode 0)           ─ unfinished: mode 0
             write; utime(M); fchmod(final mode)      ─ finished:   mtime M
    the snapshot's commit                             records each file (its mtime M)
                                                      and drops the mark in one transaction

``repair`` (the first thing ``flush_vault`` does while the mark is there) removes every
vault file no store row records that still has mode 0 or mtime M: this clone's, finished
or not; the next snapshot writes them again. A person's file is never among them: one
that was there first made the exclusive create fail (merged, never touched), and an edit
sets its own mtime. After a power cut the file system may show the create without the
later steps (mode 0, or mtime M with the data short), never a later step without the
earlier ones (its journal commits metadata in order: ext4, XFS, btrfs).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Store
from replica.vault import files as vlt

MARK = "clone_files"  # meta key: the mtime of the files an unfinished snapshot created
UNFINISHED = 0  # the mode a file has until its data and mtime are written
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (setting it to read
    it would, for a moment, apply to files other threads create)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def final_mode() -> int:
    """The mode a written file gets: what ``open(…, 0o644)`` gives under the umask (never
    the unfinished mark)."""
    return (0o644 & ~_umask()) or 0o600


def create(path: str, data: bytes, mtime_ns: int, mode: int) -> bool:
    """Create ``path`` holding ``data`` with mtime ``mtime_ns``; False (nothing written) if
    anything is at that path already, a symlink included."""
    try:
        fd = os.open(path, _FLAGS, UNFINISHED)
    except FileExistsError:
        return False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.utime(fd, ns=(mtime_ns, mtime_ns))
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True


def mark(vault: Path, store: Store, mtime_ns: int) -> None:
    """Before the first file: say, durably, which mtime this clone's files carry (after
    repairing what an earlier cut clone left, whose mark this replaces)."""
    repair(vault, store)
    store.set_meta(MARK, {"mtime_ns": mtime_ns})


def done_txn(conn: Conn) -> None:
    """In the transaction that records the files: they are the store's now."""
    conn.execute("DELETE FROM meta WHERE key = ?", (MARK,))


def repair(vault: Path, store: Store) -> int:
    """Remove the files an unfinished clone left (see the module docstring); returns how
    many. Nothing to do (one meta read) unless a clone was cut."""
    marked = store.get_meta(MARK)
    if not marked:
        return 0
    mtime_ns = marked.get("mtime_ns")
    removed = 0
    if vault.is_dir():
        with store.engine.connect() as conn:
            recorded = {r[0] for r in st.file_index_txn(conn)}
        for entry_id, fs in vlt.scan(vault).files.items():
            if entry_id in recorded:
                continue
            try:
                info = os.lstat(fs.os_path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and (stat.S_IMODE(info.st_mode) == UNFINISHED
                                               or info.st_mtime_ns == mtime_ns):
                try:
                    os.unlink(fs.os_path)
                    removed += 1
                except FileNotFoundError:
                    pass
    with store.tx() as conn:
        if st.get_meta_txn(conn, MARK) == marked:
            done_txn(conn)
    return removed
