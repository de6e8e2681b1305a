"""Proposals from this machine (docs/agents.md, "Proposals"): an MCP session files one
under its own delegation; a member lists, shows, accepts or rejects them with this device's
credential (``quire proposals``). The hub decides everything (hub/proposals.py); this only
builds requests.

    propose(session, entry, reason)   the op on the version the replica has of the entry
                                      (the hub's current one, else base_mismatch: sync)
    ask(client, space, verb, …)       list / show / accept / reject / withdraw
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from shared.entry import Entry
from shared.wire import Op

# what a refusal at the call tells an agent to do instead (write, delete, edit, restore)
PROPOSE_HINT = ("propose: file the same change with the propose tool and your reason; a "
                "member who may make it accepts or rejects it")


def base_of(space: Any, entry_id: str) -> str | None:
    """The version of ``entry_id`` this replica last synced (None: absent or deleted)."""
    from replica.store import store as st

    store = st.Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            s = st.get_state_txn(conn, entry_id)
    finally:
        store.close()
    return s.synced.version if s.synced is not None and not s.synced.deleted else None


def path(space_id: str, proposal: str | None = None, verb: str | None = None) -> str:
    out = f"/v1/spaces/{quote(space_id, safe='')}/proposals"
    if proposal is not None:
        out += f"/{quote(proposal, safe='')}"
    if verb is not None:
        out += f"/{verb}"
    return out


def file(client: Any, space_id: str, entry: Entry, base: str | None, reason: str
         ) -> dict[str, Any]:
    """POST the proposal (``entry``: the whole proposed entry, or a tombstone)."""
    with client:
        return dict(client.admin_post(path(space_id), {"op": Op(entry, base).to_wire(),
                                                       "reason": reason}))


def ask(client: Any, space_id: str, verb: str, proposal: str | None = None,
        body: dict[str, Any] | None = None, state: str | None = None) -> dict[str, Any]:
    """``list`` (``state``), ``show``, ``accept``, ``reject`` (``body``: reason),
    ``withdraw``; ``client`` is closed here."""
    with client:
        if verb == "list":
            return dict(client.admin_get(path(space_id), {"state": state or "open"}))
        if verb == "show":
            return dict(client.admin_get(path(space_id, proposal), {}))
        return dict(client.admin_post(path(space_id, proposal, verb), body or {}))
