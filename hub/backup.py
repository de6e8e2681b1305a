"""``quire hub backup``: a consistent copy of a serving hub's SQLite database, and the check
that a file is one (used again by ``quire hub restore``, hub/restore.py).

    hub.db (WAL, writers publishing) ──sqlite3 online backup, one step──▶ OUT.partial
        one read transaction: every page as of one commit, whatever writers do meanwhile
    OUT.partial ──journal_mode=DELETE, quire_backup row (taken_at, hub_id, revision)──▶
    OUT.partial ──inspect: integrity_check, Quire tables, hub_state──▶ fsync, rename to OUT

Nothing is written to the hub. PostgreSQL hubs are backed up with ``pg_dump`` (see
docs/operations.md); ``quire hub restore`` reads a database restored from such a dump.
The hub key is not in the database: back up ``hub_key.pem`` separately (once).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

HEADER = b"SQLite format 3\x00"
REQUIRED = {"hub_state", "spaces", "entries", "batches", "audit", "alembic_version"}


class BackupError(Exception):
    """A documented failure: ``code`` is the stable error code, nothing was changed."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def sqlite_path(database_url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL; None for any other database."""
    if not database_url.startswith("sqlite:///"):
        return None
    return Path(database_url[len("sqlite:///"):])


def take(database_url: str, out: Path, now: int) -> dict[str, Any]:
    """Copy the hub's database to ``out`` (which must not exist) and check the copy."""
    src_path = sqlite_path(database_url)
    if src_path is None:
        raise BackupError("use_pg_dump", "this hub's database is PostgreSQL: back it up with "
                          "pg_dump -Fc (docs/operations.md, 'Backup and restore')")
    if not src_path.exists():
        raise BackupError("not_initialized", f"no hub database at {src_path}")
    if out.exists() or out.is_symlink():
        raise BackupError("already_exists", f"{out} exists; give a new file name")
    if not out.parent.is_dir():
        raise BackupError("not_found", f"no folder {out.parent}")
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(f"file:{src_path}?mode=ro", uri=True, timeout=30)
        dst = sqlite3.connect(partial)
        try:
            src.execute("PRAGMA busy_timeout=30000")
            src.backup(dst)  # pages=-1: one step, one read transaction, one consistent view
            hub_id = dst.execute("SELECT hub_id FROM hub_state WHERE id = 1").fetchone()
            revision = dst.execute("SELECT version_num FROM alembic_version").fetchone()
            dst.execute("PRAGMA journal_mode=DELETE")  # a single file, no -wal beside it
            dst.execute("CREATE TABLE quire_backup (taken_at INTEGER NOT NULL, "
                        "hub_id TEXT NOT NULL, revision TEXT NOT NULL)")
            dst.execute("INSERT INTO quire_backup VALUES (?, ?, ?)",
                        (now, hub_id[0] if hub_id else "", revision[0] if revision else ""))
            dst.commit()
        finally:
            dst.close()
            src.close()
        doc = inspect(partial)
        fd = os.open(partial, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(partial, 0o600)
        os.rename(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return dict(doc, out=str(out), bytes=out.stat().st_size)


def inspect(path: Path) -> dict[str, Any]:
    """What a backup file holds (hub id, schema revision, each space's head and entry count),
    read-only; ``BackupError('not_a_backup')`` when it is not a sound Quire database."""
    if not path.is_file():
        raise BackupError("not_found", f"no backup file at {path}")
    with open(path, "rb") as f:
        if f.read(len(HEADER)) != HEADER:
            raise BackupError("not_a_backup", f"{path} is not a Quire backup (not SQLite)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as e:
        raise BackupError("not_a_backup", f"{path} cannot be opened: {e}") from None
    try:
        return _inspect(conn, path)
    except sqlite3.Error as e:
        raise BackupError("not_a_backup", f"{path} is not a Quire backup: {e}") from None
    finally:
        conn.close()


def _inspect(conn: sqlite3.Connection, path: Path) -> dict[str, Any]:
    check = conn.execute("PRAGMA integrity_check").fetchall()
    if check != [("ok",)]:
        raise BackupError("not_a_backup", f"{path} fails SQLite's integrity check: "
                          f"{check[:3]}")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not REQUIRED <= tables:
        raise BackupError("not_a_backup", f"{path} is not a Quire backup (missing tables "
                          f"{sorted(REQUIRED - tables)})")
    hub = conn.execute("SELECT hub_id FROM hub_state WHERE id = 1").fetchone()
    if hub is None:
        raise BackupError("not_a_backup", f"{path} is not a Quire backup (no hub state)")
    taken = (conn.execute("SELECT taken_at FROM quire_backup").fetchone()
             if "quire_backup" in tables else None)
    spaces = [{"id": r[0], "name": r[1], "epoch": r[2], "seq": int(r[3]), "digest": r[4],
               "entries": int(r[5])} for r in conn.execute(
        "SELECT s.id, s.name, s.epoch, s.head_seq, s.head_digest, "
        "(SELECT COUNT(*) FROM entries e WHERE e.space_id = s.id AND NOT e.deleted) "
        "FROM spaces s ORDER BY s.name")]
    return {"hub_id": hub[0], "taken_at": taken[0] if taken else None,
            "revision": conn.execute("SELECT version_num FROM alembic_version").fetchone()[0],
            "spaces": spaces}
