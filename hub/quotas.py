"""Quotas per space (live entries, their bytes, history bytes) and per hub (all spaces'
bytes), checked in the publishing transaction before anything is written.

    guard.commit_txn (space row locked, bases checked)
      └─ check_and_count_txn
           usage row of the space (computed once from entries and batches if missing)
           + this batch: entries created - deleted, bytes of new - old live contents,
             bytes of the batch as stored
           over a limit that this batch grows?  -> QuotaExceeded (quota_exceeded, numbers)
           else the usage row is updated in the same transaction (rolled back with it)

A limit only refuses what grows its measure: at the entry quota an update or a delete is
accepted, a create is not. The history quota is grown by every batch (history only grows
until an epoch restarts it). Limits: the space's own (set by its admins, ``set_quota``)
or else the hub's settings; 0 means none. The hub total is read without a lock: concurrent
publications to different spaces may overshoot it by what they add together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hub import audit
from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.store.batches import current_contents_txn
from hub.store.db import Store
from hub.store.quotas_sql import (
    history_bytes_txn,
    hub_total_bytes_txn,
    insert_usage_txn,
    live_counts_txn,
    locked_usage_txn,
    update_usage_txn,
    usage_row_txn,
    write_counts_txn,
)
from shared.attachments import DEFAULT_MAX_BYTES
from shared.errors import InvalidRequest, QuotaExceeded

FIELDS = ("max_entries", "max_bytes", "max_history_bytes")
MEASURE = {"max_entries": "entries", "max_bytes": "bytes",
           "max_history_bytes": "history_bytes"}
ATTACHMENT_FIELD = "max_attachment_bytes"  # a limit on one file, not a measure (hub/blobs.py)


@dataclass(frozen=True)
class HubQuotas:
    """The hub's settings: per-space defaults and the hub-wide total (0: none)."""

    max_entries: int = 0
    max_bytes: int = 0
    max_history_bytes: int = 0
    hub_max_bytes: int = 0
    max_attachment_bytes: int = DEFAULT_MAX_BYTES  # one attachment (hub/blobs.py)

    @classmethod
    def from_settings(cls, s: Any) -> HubQuotas:
        return cls(s.space_max_entries, s.space_max_bytes, s.space_max_history_bytes,
                   s.hub_max_bytes, s.space_max_attachment_bytes)


def recount_txn(conn: Any, space_id: str, *, history: bool = False) -> None:
    """Count the live entries again (a restore replaced them; history is unchanged), and
    with ``history`` the stored batches too (a purge rewrote them, hub/purge.py)."""
    n, size = live_counts_txn(conn, space_id)
    values: dict[str, int] = {"entries": n, "bytes": size}
    if history:
        usage_txn(conn, space_id, lock=True)  # the row exists (counted) before it is set
        values["history_bytes"] = history_bytes_txn(conn, space_id)
    update_usage_txn(conn, space_id, values)


def usage_txn(conn: Any, space_id: str, *, lock: bool = False, insert: bool = True
              ) -> dict[str, Any]:
    """The space's usage row; counted from entries and batches the first time (and kept,
    unless ``insert`` is off: a read transaction)."""
    found = usage_row_txn(conn, space_id, lock=lock)
    if found is not None:
        return found
    n, size = live_counts_txn(conn, space_id)
    row = {"space_id": space_id, "entries": n, "bytes": size,
           "history_bytes": history_bytes_txn(conn, space_id), "max_entries": None,
           "max_bytes": None, "max_history_bytes": None}
    if insert:
        insert_usage_txn(conn, row)
    return row


def _usage_locked_txn(conn: Any, space_id: str, row: Any = None) -> dict[str, Any]:
    """The space's quota row, locked; ``row``: as this transaction already read it locked
    (the guard's ``commit_context_read``)."""
    if row is not None:
        return dict(row)
    found = locked_usage_txn(conn, space_id)
    if found is not None:
        return found
    return usage_txn(conn, space_id, lock=True)  # first publication: counted and inserted


def limits(row: dict[str, Any], hub: HubQuotas) -> dict[str, int]:
    """The limits in force for a space: its own, else the hub's (0: none)."""
    return {f: (row[f] if row[f] is not None else getattr(hub, f)) for f in FIELDS}


def check_and_count_txn(conn: Any, hub: HubQuotas, space_id: str, ops: Sequence[Any],
                        current: dict[str, tuple[str, bool]], body: str,
                        new_contents: list[str], row: dict[str, Any] | None = None
                        ) -> None:
    """Refuse the batch if it grows a measure past its limit; else count it. ``row``: the
    quota row as this transaction read it locked, if it did."""
    count_txn(conn, check_txn(conn, hub, space_id, ops, current, body, new_contents, row))


def count_txn(conn: Any, counts: dict[str, Any]) -> None:
    """Write the counts ``check_txn`` returned (the guard sends it with its other writes)."""
    write_counts_txn(conn, counts)


def check_txn(conn: Any, hub: HubQuotas, space_id: str, ops: Sequence[Any],
              current: dict[str, tuple[str, bool]], body: str, new_contents: list[str],
              row: dict[str, Any] | None = None, contents: dict[str, str] | None = None
              ) -> dict[str, Any]:
    """``check_and_count_txn`` without the write: raises ``quota_exceeded``, else returns
    the space's counts after the batch, for ``count_txn`` in the same transaction.
    ``contents``: the live contents of the touched entries, as this transaction read them
    with ``current`` (``contents_reads``)."""
    row = _usage_locked_txn(conn, space_id, row)
    live_before = {eid for eid, (_, deleted) in current.items() if not deleted}
    old = contents if contents is not None else (
        current_contents_txn(conn, space_id, sorted(live_before)) if live_before else {})
    d_entries = d_bytes = 0
    for op, content in zip(ops, new_contents, strict=True):
        was_live = op.entry_id in live_before
        d_bytes -= len(old.get(op.entry_id, "").encode()) if was_live else 0
        if op.entry.deleted:
            d_entries -= 1 if was_live else 0
        else:
            d_entries += 0 if was_live else 1
            d_bytes += len(content.encode())
    delta = {"entries": d_entries, "bytes": d_bytes, "history_bytes": len(body.encode())}
    lim = limits(row, hub)
    for f in FIELDS:
        m = MEASURE[f]
        after = row[m] + delta[m]
        if lim[f] and delta[m] > 0 and after > lim[f]:
            raise QuotaExceeded(
                f"the space's {m.replace('_', ' ')} quota is {lim[f]}: it holds {row[m]}, "
                f"this batch would make it {after}; nothing was written",
                {"scope": "space", "quota": m, "limit": lim[f], "usage": row[m],
                 "after": after})
    grow = delta["bytes"] + delta["history_bytes"]
    if hub.hub_max_bytes and grow > 0:
        total = hub_total_bytes_txn(conn)
        if total + grow > hub.hub_max_bytes:
            raise QuotaExceeded(
                f"the hub's storage quota is {hub.hub_max_bytes} bytes: it holds {total}, "
                f"this batch would make it {total + grow}; nothing was written",
                {"scope": "hub", "quota": "bytes", "limit": hub.hub_max_bytes,
                 "usage": total, "after": total + grow})
    return {"s": space_id, "e": row["entries"] + d_entries, "b": row["bytes"] + d_bytes,
            "h": row["history_bytes"] + delta["history_bytes"]}


def usage_doc_txn(conn: Any, hub: HubQuotas, space_id: str) -> dict[str, Any]:
    """Usage and limits for a read transaction (the head carries it, unsigned)."""
    return _doc(usage_txn(conn, space_id, insert=False), hub)


def _doc(row: dict[str, Any], hub: HubQuotas) -> dict[str, Any]:
    lim = limits(row, hub)
    return {"entries": row["entries"], "bytes": row["bytes"],
            "history_bytes": row["history_bytes"],
            "quota": {MEASURE[f]: lim[f] for f in FIELDS},
            "own_quota": {MEASURE[f]: row[f] for f in FIELDS},
            "attachment_limit": (row.get(ATTACHMENT_FIELD) if row.get(ATTACHMENT_FIELD)
                                 is not None else hub.max_attachment_bytes)}


def usage(store: Store, hub: HubQuotas, p: Principal, space_ref: str) -> dict[str, Any]:
    """``GET /v1/spaces/{space}/usage`` (members): usage and the limits in force."""
    def txn(conn: Any) -> dict[str, Any]:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        doc = dict(_doc(usage_txn(conn, space.id), hub), space=space.id)
        if not scopes.scope_txn(conn, p, space, role).unrestricted:
            # the space's totals would count what this reader may not read: only the limits
            doc.update(entries=None, bytes=None, history_bytes=None, scoped=True)
        return doc
    return store.run_write(txn)


def set_quota(store: Store, hub: HubQuotas, p: Principal, space_ref: str,
              body: dict[str, Any], now: int) -> dict[str, Any]:
    """``POST /v1/spaces/{space}/quota`` (space admins): each of ``max_entries``,
    ``max_bytes``, ``max_history_bytes`` a non-negative integer (0: none) or null (the
    hub's default); absent fields are unchanged."""
    values: dict[str, int | None] = {}
    for f, v in body.items():
        if f not in (*FIELDS, ATTACHMENT_FIELD) or not (v is None or (isinstance(v, int) and not isinstance(v, bool)
                                                 and 0 <= v <= 2**53 - 1)):
            raise InvalidRequest(f"{f} must be a non-negative integer or null",
                                 {"field": f})
        values[f] = v
    if not values:
        raise InvalidRequest(f"give at least one of {', '.join((*FIELDS, ATTACHMENT_FIELD))}")

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        usage_txn(conn, space.id)
        update_usage_txn(conn, space.id, values)
        audit.record_space_txn(conn, space, at=now, action="quota.set", actor=p.actor(),
                               details=values)
        return dict(_doc(usage_txn(conn, space.id), hub), space=space.id)
    return store.run_write(txn)
