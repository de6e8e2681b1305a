"""Resolutions waiting to be published: the desk (replica/conflicts/desk.py) records each one in
the store's ``resolutions`` meta; the sync engine (replica/engine/sync.py) reads them here to put
them in batches of their own, whose provenance names the resolving agent, and forgets them
once such a batch is accepted. The sync engine and the desk both depend on this module,
never on each other's internals.
"""

from __future__ import annotations

from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Store
from shared.wire import MAX_PROVENANCE_VALUE, Op


def plan_batch(store: Store, ops: list[Op], provenance: dict[str, str] | None
               ) -> tuple[list[Op], dict[str, str] | None]:
    """Pick the next batch's ops and provenance: resolutions go out first, in a batch of
    their own per resolving agent, so the hub's history says which agent resolved what."""
    res = store.get_meta("resolutions") or {}
    # only the resolved version itself: an edit made after the resolution is not the agent's
    mine = [op for op in ops if op.entry_id in res
            and res[op.entry_id].get("version") in (None, op.entry.version)]
    if not mine:
        return ops, provenance
    first = res[mine[0].entry_id]
    group = [op for op in mine if res[op.entry_id].get("agent") == first.get("agent")]
    packets = sorted({res[op.entry_id]["packet_id"] for op in group})
    prov = dict(provenance or {})
    if first.get("agent"):
        prov["agent"] = first["agent"]
    prov["tool"] = "quire conflict resolve"
    prov["note"] = ("resolved " + " ".join(packets))[:MAX_PROVENANCE_VALUE]
    return group, prov


def forget_resolutions_txn(conn: Conn, entry_ids: list[str]) -> None:
    """Called when a batch is accepted: its resolutions are published."""
    res = st.get_meta_txn(conn, "resolutions", {}) or {}
    if any(e in res for e in entry_ids):
        st.set_meta_txn(conn, "resolutions", {k: v for k, v in res.items()
                                               if k not in entry_ids})
