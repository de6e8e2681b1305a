"""SQL for attachments' bytes (hub/blobs.py): the ``blobs`` table, one row per space and
SHA-256. ``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hub.store.schema import blob_uploads, blobs, space_quota


def held_sizes_txn(conn: Connection, space_id: str, hashes: Iterable[str]) -> dict[str, int]:
    """sha256 → size of the blobs of ``hashes`` the space holds."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    rows = conn.execute(select(blobs.c.sha256, blobs.c.size).where(
        blobs.c.space_id == space_id, blobs.c.sha256.in_(wanted))).all()
    return {r.sha256: int(r.size) for r in rows}


def insert_blob_txn(conn: Connection, space_id: str, sha256: str, data: bytes,
                    now: int) -> bool:
    """Store a blob; False when the space held it already (nothing written)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(blobs).values(space_id=space_id, sha256=sha256, size=len(data),
                                        data=data, created_at=now)
    return conn.execute(stmt.on_conflict_do_nothing()).rowcount == 1


def blob_data_txn(conn: Connection, space_id: str, sha256: str) -> bytes | None:
    row = conn.execute(select(blobs.c.data).where(
        blobs.c.space_id == space_id, blobs.c.sha256 == sha256)).first()
    return None if row is None else bytes(row.data)


def attachment_limit_txn(conn: Connection, space_id: str) -> int | None:
    """The space's own limit on one attachment (None: the hub's setting)."""
    v = conn.execute(select(space_quota.c.max_attachment_bytes).where(
        space_quota.c.space_id == space_id)).scalar()
    return None if v is None else int(v)


def blobs_bytes_txn(conn: Connection, space_id: str) -> int:
    return int(conn.execute(select(func.coalesce(func.sum(blobs.c.size), 0)).where(
        blobs.c.space_id == space_id)).scalar_one())


def all_hashes_txn(conn: Connection, space_id: str) -> list[str]:
    return [r.sha256 for r in conn.execute(select(blobs.c.sha256).where(
        blobs.c.space_id == space_id))]


def delete_blobs_txn(conn: Connection, space_id: str, hashes: Iterable[str]) -> int:
    """Remove these blobs of the space; how many bytes went."""
    wanted = sorted(set(hashes))
    if not wanted:
        return 0
    gone = sum(held_sizes_txn(conn, space_id, wanted).values())
    conn.execute(delete(blobs).where(blobs.c.space_id == space_id,
                                     blobs.c.sha256.in_(wanted)))
    return gone


def copy_rows_txn(rows: Iterable[Any], conn: Connection, space_id: str) -> int:
    """Insert blob rows (``sha256, size, data, created_at``) read elsewhere (a backup) into
    the space, skipping those it holds; how many were added."""
    n = 0
    for r in rows:
        if insert_blob_txn(conn, space_id, r.sha256, bytes(r.data), int(r.created_at)):
            n += 1
    return n


def named_txn(conn: Connection, space_id: str, sha256: str) -> bool:
    """Does any entry version the space still stores name this hash (its current rows,
    its batches, its proposals)? A hash is 64 hex digits: found in a content's text only
    where an attachment names it."""
    pat = f"%{sha256}%"
    for table, col in (("entries", "content"), ("batches", "body"),
                       ("proposals", "content")):
        if conn.execute(text(f"SELECT 1 FROM {table} WHERE space_id = :s AND {col} LIKE :p "
                             "LIMIT 1"), {"s": space_id, "p": pat}).first() is not None:
            return True
    return False


def upload_txn(conn: Connection, space_id: str, sha256: str) -> tuple[int, bytes] | None:
    """(total, bytes so far) of a resumable upload, or None."""
    row = conn.execute(select(blob_uploads.c.total, blob_uploads.c.data).where(
        blob_uploads.c.space_id == space_id, blob_uploads.c.sha256 == sha256)).first()
    return None if row is None else (int(row.total), bytes(row.data))


def save_upload_txn(conn: Connection, space_id: str, sha256: str, total: int, data: bytes,
                    now: int) -> None:
    """Set a resumable upload's bytes so far (inserted or replaced)."""
    conn.execute(delete(blob_uploads).where(blob_uploads.c.space_id == space_id,
                                            blob_uploads.c.sha256 == sha256))
    conn.execute(blob_uploads.insert().values(space_id=space_id, sha256=sha256,
                                              total=total, data=data, updated_at=now))


def drop_upload_txn(conn: Connection, space_id: str, sha256: str) -> None:
    conn.execute(delete(blob_uploads).where(blob_uploads.c.space_id == space_id,
                                            blob_uploads.c.sha256 == sha256))


def namers_txn(conn: Connection, space_id: str, sha256: str) -> set[str]:
    """The ids of the entries any version the space still stores (its current rows, its
    batches) names ``sha256`` as its attachment's bytes (hub/blob_scope.py). A LIKE finds
    the rows where the hash's text occurs; each is parsed so only an attachment's
    ``meta.sha256`` counts."""
    pat = f"%{sha256}%"
    out: set[str] = set()
    for row in conn.execute(text("SELECT entry_id, content FROM entries WHERE space_id = :s "
                                 "AND content LIKE :p"), {"s": space_id, "p": pat}):
        if _names(json.loads(row.content), sha256):
            out.add(row.entry_id)
    for row in conn.execute(text("SELECT body FROM batches WHERE space_id = :s "
                                 "AND body LIKE :p"), {"s": space_id, "p": pat}):
        for op in json.loads(row.body).get("ops", []):
            e = op.get("entry") if isinstance(op, dict) else None
            if isinstance(e, dict) and _names(e, sha256):
                out.add(str(e.get("id")))
    return out


def _names(entry: Any, sha256: str) -> bool:
    meta = entry.get("meta") if isinstance(entry, dict) else None
    return isinstance(meta, dict) and meta.get("sha256") == sha256
