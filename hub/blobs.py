"""Attachments' bytes on the hub (docs/architecture.md, "Attachments"; decisions.md D147).

    PUT /v1/spaces/S/blobs/<sha256>   (editors)          GET … (members)
      hash the bytes: not <sha256>? blob_mismatch         the bytes as stored, when the
      over the space's attachment limit? too_large        caller may read an entry naming
      held already? nothing written (idempotent)          them (else not_found, as absent:
      else: quota (the space's bytes grow by the size),   hub/blob_scope.py); the replica
            stored and counted in one transaction         checks them against the hash
      (held, but named only by entries the caller may     (the hub's word is never enough)
       not read: answered as new bytes, nothing written)

    guard.prepare_txn ─► check_batch_txn: every attachment a batch puts is well formed
                         (shared/attachments.py), within the limit (too_large, naming the
                         file), and its blob is held with its size (blob_missing: the
                         hashes to upload first)

A blob is per space: one space's members cannot learn what another space holds by
uploading or fetching a hash. A purge removes the blobs no entry version left names
(hub/purge.py). What the bytes are is the entry's word, signed into the state root; the
hub only stores and serves them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hub.access import Principal, space_access_txn
from hub.blob_scope import may_fetch_txn, prove_txn
from hub.store.blobs_sql import (
    attachment_limit_txn,
    blob_data_txn,
    delete_blobs_txn,
    drop_upload_txn,
    held_sizes_txn,
    insert_blob_txn,
    named_txn,
    save_upload_txn,
    upload_txn,
)
from hub.store.db import Store
from hub.store.quotas_sql import hub_total_bytes_txn, update_usage_txn
from hub.store.spaces_sql import find_space_txn
from shared.attachments import (
    DEFAULT_MAX_BYTES,
    attachment_problem,
    blob_hash,
    declares_attachment,
    is_sha256,
    too_large_message,
)
from shared.errors import (
    BlobMismatch,
    BlobMissing,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
    TooLarge,
)


def limit_txn(conn: Any, space_id: str, hub_default: int = DEFAULT_MAX_BYTES) -> int:
    """The most bytes one attachment of the space may have: its own, else the hub's."""
    own = attachment_limit_txn(conn, space_id)
    return hub_default if own is None else own


def upload_limit(store: Store, space_ref: str, hub_default: int) -> int:
    """The body limit of an upload to ``space_ref``, read before the body (the caller's
    access is checked with the body, in ``put_blob``)."""
    with store.read() as conn:
        found = find_space_txn(conn, space_ref)
        return limit_txn(conn, found.id, hub_default) if found is not None else hub_default


def _check_hash(sha256: str) -> None:
    if not is_sha256(sha256):
        raise InvalidRequest("a blob is named by its SHA-256: 64 lowercase hex digits",
                             {"sha256": sha256[:80]})


def put_blob(store: Store, quotas: Any, p: Principal, space_ref: str, sha256: str,
             data: bytes, now: int) -> dict[str, Any]:
    """Store one blob (module docstring); ``{"sha256", "size", "stored"}`` (``stored``:
    False when the space held it already)."""
    _check_hash(sha256)
    if blob_hash(data) != sha256:
        raise BlobMismatch("the bytes sent do not hash to the SHA-256 in the URL; nothing "
                           "was stored", {"sha256": sha256, "size": len(data)})

    def txn(conn: Any) -> dict[str, Any]:
        space, role = space_access_txn(conn, p, space_ref, "editor", lock=True)
        held = _held_for_txn(conn, p, space, role, sha256)
        if held == "hidden":
            prove_txn(conn, p, space.id, sha256, len(data), now)
        return _store_txn(conn, quotas, space.id, sha256, data, now, held)

    return store.run_write(txn)


def _check_limit_txn(conn: Any, quotas: Any, space_id: str, sha256: str, size: int) -> None:
    limit = limit_txn(conn, space_id, quotas.max_attachment_bytes)
    if limit and size > limit:
        raise TooLarge(too_large_message(f"blob {sha256[:12]}", size, limit),
                       {"sha256": sha256, "size": size, "limit": limit})


def _held_for_txn(conn: Any, p: Principal, space: Any, role: str | None, sha256: str
                  ) -> str | None:
    """Whether the space holds blob ``sha256`` as the caller may be told: ``"seen"`` (held,
    and the caller may read an entry naming it), ``"hidden"`` (held, but only entries the
    caller may not read name it: answered as not held, hub/blob_scope.py) or None."""
    if not held_sizes_txn(conn, space.id, [sha256]):
        return None
    return "seen" if may_fetch_txn(conn, p, space, role, sha256) else "hidden"


def _store_txn(conn: Any, quotas: Any, space_id: str, sha256: str, data: bytes,
               now: int, held: str | None) -> dict[str, Any]:
    """Keep checked bytes as the space's blob ``sha256``: the limit, then (bytes new to the
    caller) the quota, counted in the same transaction. ``held``: ``_held_for_txn``; bytes
    held but hidden from the caller are answered as new ones, and nothing is written."""
    from hub import quotas as quota_rules

    _check_limit_txn(conn, quotas, space_id, sha256, len(data))
    if held == "seen":
        return {"sha256": sha256, "size": len(data), "stored": False}
    row = quota_rules.usage_txn(conn, space_id, lock=True)
    cap = row["max_bytes"] if row["max_bytes"] is not None else quotas.max_bytes
    after = row["bytes"] + len(data)
    if cap and after > cap:
        raise QuotaExceeded(
            f"the space's bytes quota is {cap}: it holds {row['bytes']}, this "
            f"attachment would make it {after}; nothing was stored",
            {"scope": "space", "quota": "bytes", "limit": cap, "usage": row["bytes"],
             "after": after})
    if quotas.hub_max_bytes:
        total = hub_total_bytes_txn(conn)
        if total + len(data) > quotas.hub_max_bytes:
            raise QuotaExceeded(
                f"the hub's storage quota is {quotas.hub_max_bytes} bytes: it holds "
                f"{total}; nothing was stored",
                {"scope": "hub", "quota": "bytes", "limit": quotas.hub_max_bytes,
                 "usage": total, "after": total + len(data)})
    if held == "hidden":  # the same answer as new bytes: the caller sent them, nothing more
        return {"sha256": sha256, "size": len(data), "stored": True}
    insert_blob_txn(conn, space_id, sha256, data, now)
    update_usage_txn(conn, space_id, {"bytes": after})
    return {"sha256": sha256, "size": len(data), "stored": True}


def put_range(store: Store, quotas: Any, p: Principal, space_ref: str, sha256: str,
              chunk: bytes, start: int, total: int, now: int) -> dict[str, Any]:
    """One range of a resumable upload (``Content-Range: bytes START-END/TOTAL``): appended
    to the bytes received so far, which it must start right after (else
    ``invalid_request`` with ``details.received``: where to resume); the range that
    completes it is checked and stored as ``put_blob`` stores. ``received``: bytes held."""
    _check_hash(sha256)

    def txn(conn: Any) -> dict[str, Any]:
        space, role = space_access_txn(conn, p, space_ref, "editor", lock=True)
        _check_limit_txn(conn, quotas, space.id, sha256, total)
        held = _held_for_txn(conn, p, space, role, sha256)
        if held == "seen":
            drop_upload_txn(conn, space.id, sha256)
            return {"sha256": sha256, "size": total, "stored": False, "received": total}
        found = upload_txn(conn, space.id, sha256)
        have = found[1] if found is not None and found[0] == total and start > 0 else b""
        if start != len(have):
            raise InvalidRequest(f"this upload resumes at byte {len(have)}",
                                 {"received": len(have), "sha256": sha256})
        data = have + chunk
        if len(data) > total:
            raise InvalidRequest("the range goes past the upload's total",
                                 {"received": len(have), "total": total})
        if len(data) < total:
            save_upload_txn(conn, space.id, sha256, total, data, now)
            return {"sha256": sha256, "size": total, "stored": False, "received": len(data)}
        drop_upload_txn(conn, space.id, sha256)
        if blob_hash(data) != sha256:
            return {"mismatch": True}
        if held == "hidden":
            prove_txn(conn, p, space.id, sha256, total, now)
        return dict(_store_txn(conn, quotas, space.id, sha256, data, now, held),
                    received=total)

    out = store.run_write(txn)
    if out.get("mismatch"):  # the partial upload is dropped (committed): start again
        raise BlobMismatch("the bytes uploaded do not hash to the SHA-256 in the URL; "
                           "nothing was stored", {"sha256": sha256, "size": total})
    return out


def upload_status(store: Store, p: Principal, space_ref: str, sha256: str
                  ) -> dict[str, Any]:
    """Where a resumable upload stands: ``{"sha256", "received", "stored"}`` (``stored``:
    the space holds the blob whole, nothing to send)."""
    _check_hash(sha256)
    with store.read() as conn:
        space, role = space_access_txn(conn, p, space_ref, "editor")
        held = held_sizes_txn(conn, space.id, [sha256])
        if held and not may_fetch_txn(conn, p, space, role, sha256):
            held = {}  # hidden from the caller: as if not held (hub/blob_scope.py)
        found = upload_txn(conn, space.id, sha256)
    if held:
        return {"sha256": sha256, "received": held[sha256], "stored": True}
    return {"sha256": sha256, "received": len(found[1]) if found else 0, "stored": False}


def get_blob(store: Store, p: Principal, space_ref: str, sha256: str) -> bytes:
    """The bytes of one blob of the space (members), or ``not_found``: also when the
    caller's read rules hide every entry naming it (hub/blob_scope.py), read in the same
    transaction as the bytes."""
    _check_hash(sha256)
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        data = (blob_data_txn(conn, space.id, sha256)
                if may_fetch_txn(conn, p, space, role, sha256) else None)
    if data is None:
        raise NotFound("this space holds no blob with that SHA-256", {"sha256": sha256})
    return data


def hashes_in(contents: Iterable[Any]) -> set[str]:
    """Pure: the blob hashes the attachment entries among ``contents`` name (entry dicts,
    or wire ops carrying one under ``entry``)."""
    out: set[str] = set()
    for c in contents:
        e = c.get("entry", c) if isinstance(c, dict) else None
        meta = e.get("meta") if isinstance(e, dict) else None
        if isinstance(meta, dict) and declares_attachment(meta) and is_sha256(meta.get("sha256")):
            out.add(meta["sha256"])
    return out


def drop_unnamed_txn(conn: Any, space_id: str, hashes: Iterable[str]) -> list[str]:
    """After a purge rewrote the space's history: remove the blobs of ``hashes`` that no
    entry version left in it names; the hashes removed (the database is compacted after
    the commit, hub/purge.py, so the bytes leave its files)."""
    gone = sorted(h for h in set(hashes) if not named_txn(conn, space_id, h))
    delete_blobs_txn(conn, space_id, gone)
    for h in gone:  # and any upload of the same bytes still under way
        drop_upload_txn(conn, space_id, h)
    return gone


def carry_restored_txn(conn: Any, backup: Store, space_id: str,
                       contents: Iterable[Any], now: int) -> int:
    """A restore from a backup (hub/restore.py): the blobs the restored entries name, copied
    from the backup when this hub does not hold them, one at a time; how many."""
    wanted = hashes_in(contents)
    held = held_sizes_txn(conn, space_id, wanted)
    n = 0
    for sha in sorted(wanted - set(held)):
        with backup.read() as bconn:
            data = blob_data_txn(bconn, space_id, sha)
        if data is not None and blob_hash(data) == sha:
            n += insert_blob_txn(conn, space_id, sha, data, now)
    return n


def blob_link(space_id: str, entry: Any) -> dict[str, str]:
    """``{"blob_url": …}`` for an attachment entry (a dict, as reads answer it), where its
    bytes are served as a download with its name; ``{}`` for anything else."""
    meta = entry.get("meta") if isinstance(entry, dict) else None
    if not (isinstance(meta, dict) and declares_attachment(meta)
            and is_sha256(meta.get("sha256"))):
        return {}
    from urllib.parse import quote

    return {"blob_url": f"/v1/spaces/{space_id}/blobs/{meta['sha256']}"
                        f"?name={quote(str(entry.get('id', '')), safe='')}"}


def check_batch_txn(conn: Any, space_id: str, ops: Sequence[Any],
                    hub_default: int = DEFAULT_MAX_BYTES,
                    unproven: Callable[[list[tuple[str, int]]], set[str]] | None = None
                    ) -> None:
    """Refuse a batch that puts an attachment that is malformed (``invalid_request``), over
    the space's limit (``too_large``, naming the file) or whose blob the hub does not hold
    with that size (``blob_missing``, every one listed): nothing is written. ``unproven``:
    of the held (hash, size) pairs, those the writer is answered as not held (hidden from
    it and never sent by it: hub/blob_scope.py ``unproven_txn``)."""
    wanted: dict[str, tuple[str, int]] = {}
    for op in ops:
        entry = op.entry
        if entry.deleted or not declares_attachment(entry.meta):
            continue
        problem = attachment_problem(entry)
        if problem:
            raise InvalidRequest(f"{entry.id}: {problem}", {"id": entry.id})
        wanted[entry.id] = (entry.meta["sha256"], entry.meta["size"])
    if not wanted:
        return
    limit = limit_txn(conn, space_id, hub_default)
    for eid, (_sha, size) in sorted(wanted.items()):
        if limit and size > limit:
            raise TooLarge(too_large_message(eid, size, limit),
                           {"id": eid, "size": size, "limit": limit})
    held = held_sizes_txn(conn, space_id, (sha for sha, _ in wanted.values()))
    if unproven is not None and held:
        for sha in unproven(sorted(held.items())):
            del held[sha]
    missing = [{"id": eid, "sha256": sha} for eid, (sha, size) in sorted(wanted.items())
               if held.get(sha) != size]
    if missing:
        raise BlobMissing(f"upload the bytes of {len(missing)} attachment(s) first "
                          f"({missing[0]['id']}…); nothing was written", {"missing": missing})
