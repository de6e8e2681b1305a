"""Resolutions waiting to be published: the desk (replica/conflicts/desk.py) records each one in
the store's ``resolutions`` meta; the sync engine (replica/engine/sync.py) reads them here to put
them in batches of their own (provenance ``tool: quire conflict resolve`` and the packets in
``note``), and forgets them once such a batch is accepted. The sync engine and the desk both
depend on this module, never on each other's internals.

Who publishes a resolution is who made it: one an MCP session made (``principal: agent``, an
agent principal under its delegation) goes out only in that agent's sync
(replica/engine/agent_push.py), never in the device's (``agent_owned``); one made at the CLI
goes out with the device's, and its ``--agent`` is a local label only. A batch's provenance
names an agent only when the agent's delegation sends it: the hub refuses any other
(hub/guard.py ``check_provenance``).
"""

from __future__ import annotations

from typing import Any

from replica.engine.screened import withhold_secrets
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Store
from shared.wire import MAX_PROVENANCE_VALUE, Op


def plan_batch(store: Store, ops: list[Op], provenance: dict[str, str] | None
               ) -> tuple[list[Op], dict[str, str] | None]:
    """Pick the next batch's ops and provenance: resolutions go out first, in a batch of
    their own per resolving agent (its packets in ``note``). A provenance field that holds
    a secret goes out withheld (replica/engine/screened.py)."""
    res = store.get_meta("resolutions") or {}
    # only the resolved version itself: an edit made after the resolution is not the agent's
    mine = [op for op in ops if op.entry_id in res
            and res[op.entry_id].get("version") in (None, op.entry.version)]
    if not mine:
        return ops, withhold_secrets(provenance)
    first = res[mine[0].entry_id]
    group = [op for op in mine if res[op.entry_id].get("agent") == first.get("agent")]
    # a resolution merged cleanly with a version pulled since keeps its attribution, noted
    packets = sorted({res[op.entry_id]["packet_id"] + (
        " (merged)" if res[op.entry_id].get("merged") else "") for op in group})
    prov = dict(provenance or {})  # its agent, if any, is the publishing principal's own
    prov["tool"] = "quire conflict resolve"
    prov["note"] = ("resolved " + " ".join(packets))[:MAX_PROVENANCE_VALUE]
    return group, withhold_secrets(prov)


def merged_txn(conn: Conn, entry_id: str, resolved: str | None, merged: str | None) -> None:
    """A pull merged a pending resolution of ``entry_id`` (version ``resolved``) cleanly
    with a newer remote version (``merged``, replica/engine/ledger.py): that merge is what
    goes out, still the resolution's (``plan_batch`` notes it "(merged)")."""
    res = st.get_meta_txn(conn, "resolutions", {}) or {}
    r = res.get(entry_id)
    if r is not None and r.get("version") == resolved and resolved != merged:
        res[entry_id] = dict(r, version=merged, merged=True)
        st.set_meta_txn(conn, "resolutions", res)


def forget_resolutions_txn(conn: Conn, entry_ids: list[str]) -> None:
    """Called when a batch is accepted: its resolutions are published."""
    res = st.get_meta_txn(conn, "resolutions", {}) or {}
    if any(e in res for e in entry_ids):
        st.set_meta_txn(conn, "resolutions", {k: v for k, v in res.items()
                                               if k not in entry_ids})


def agent_owned(res: dict[str, Any], entry_id: str, version: str | None) -> str | None:
    """The agent whose MCP session made the pending resolution ``version`` of ``entry_id``
    (only its own sync publishes it), or None."""
    r = res.get(entry_id)
    if not r or r.get("principal") != "agent" or r.get("version") != version:
        return None
    return str(r.get("agent") or "") or None


def resolutions_of(store: Store, agent: str) -> dict[str, str]:
    """``{entry id: resolved version}`` of the pending resolutions ``agent``'s MCP sessions
    made (``agent_owned``)."""
    res = store.get_meta("resolutions") or {}
    return {eid: r["version"] for eid, r in res.items()
            if r.get("principal") == "agent" and r.get("agent") == agent}
