"""Restore one page from its history, as a normal edit by the member (the console's
*Restore this version*, docs/console.md "Restore a page"): not an admin revert of a batch.

    plan(store, p, space, id, epoch, seq)
        the version at (epoch, seq) ──► what a restore would publish: one put of that
        content on the current version (or on the tombstone: a deleted page comes back),
        the diff from now to it, and whether the rules would let this member do it (the
        guard's own evaluation, shared/policy.py; a preview: the guard decides again)
    restore(store, publisher, p, space, id, epoch, seq, expect_base)
        plan again (nothing trusted from the form but the version asked for and the base
        the member saw); a base that moved since the preview is ``base_mismatch``; then
        ``publisher`` publishes the one put through the guard: rules, screening, quotas,
        blocks, audit, receipt, events, exactly as a replica's batch

The console holds no device key, so it cannot sign a batch; ``publisher`` is the hub's
attested publication path (hub/attested_publish.py: the member's hub-held device signs).
``publisher_for(hub)`` returns it, or None on a hub that does not have it yet: the
console then shows no restore button and the endpoint answers ``invalid_request``
(reason ``restore_unavailable``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

from hub import reads
from hub.access import Principal, space_access_txn
from hub.store.db import Store
from hub.store.rules import list_rules_txn
from shared import policy
from shared.entry import make_entry
from shared.errors import BaseMismatch, Forbidden, InvalidRequest, NotFound
from shared.humanize import stamp
from shared.wire import Op

TOOL = "console restore"  # the batch's provenance.tool (hub/activity.py: "restored")


class Publisher(Protocol):
    """Publishes ``ops`` (wire ops: ``{"op": "put", "base": …, "entry": {…}}``) in one
    batch as the member ``p`` through the guard, with ``provenance``; answers at least
    ``{"seq": N}``. Raises the guard's errors."""

    def __call__(self, p: Principal, space_ref: str, ops: list[dict[str, Any]],
                 provenance: dict[str, str]) -> dict[str, Any]: ...


def plan(store: Store, p: Principal, space_ref: str, entry_id: str, epoch: str | None,
         seq: int) -> dict[str, Any]:
    """What restoring ``entry_id`` to its version at (``epoch``, ``seq``) would publish."""
    with store.read() as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        rules = list_rules_txn(conn, space.id)
    if not policy.at_least(role, "editor"):
        raise Forbidden(f"a {role} may not publish; restoring a page is an edit",
                        {"reason": "role"})
    old = reads.get_entry(store, p, space_ref, entry_id, seq=seq, epoch=epoch)
    try:
        cur: dict[str, Any] | None = reads.get_entry(store, p, space_ref, entry_id)
    except NotFound:
        cur = None  # deleted (or purged): the put brings it back, on no base
    if cur is not None and cur["version"] == old["version"]:
        raise InvalidRequest(f"{entry_id} is already at that version: nothing to restore",
                             {"reason": "already_current"})
    action = "update" if cur is not None else "create"
    actor = policy.Actor(p.user_id, role, p.agent)
    denied = policy.denied_changes(policy.effective_rules(rules), actor,
                                   [policy.Change(entry_id, action)])
    changed = reads.diff_entries(cur["entry"] if cur else None, old["entry"])
    return {"id": entry_id, "entry": old["entry"], "version": old["version"],
            "from": old["at"], "base": cur["version"] if cur else None,
            "deleted_now": cur is None, "diff": changed,
            "denied": denied[0]["reason"] if denied else None}


def restore(store: Store, publisher: Publisher, p: Principal, space_ref: str, entry_id: str,
            epoch: str | None, seq: int, expect_base: str | None, now: int
            ) -> dict[str, Any]:
    """Publish the planned put (module docstring); ``{"seq", "version"}`` of the result."""
    got = plan(store, p, space_ref, entry_id, epoch, seq)
    if got["base"] != expect_base:
        raise BaseMismatch(f"{entry_id} changed since you looked at it; look again and "
                           "restore from there", {"reason": "changed_since_preview"})
    when = got["from"]
    note = f"restores the version of {entry_id} as of seq {when['seq']}"
    out = publisher(p, space_ref, [{"op": "put", "base": got["base"], "entry": got["entry"]}],
                    {"tool": TOOL, "note": note[:200]})
    return {"seq": out.get("seq"), "version": got["version"], "at": stamp(now, utc=True)}


def publisher_for(hub: Any) -> Publisher | None:
    """The hub's attested publication path (hub/attested_publish.py ``publish_attested``)
    as a ``Publisher``, or None when this hub has none. The member's own change: the
    attestation names the member as both proposer and approver and no agent (``agent``
    empty: the batch row, the history and ``quire log`` show no agent)."""
    try:
        mod = importlib.import_module("hub.attested_publish")
        attested_cls = importlib.import_module("hub.access").HubAttested
    except (ImportError, AttributeError):
        return None
    fn: Callable[..., Any] | None = getattr(mod, "publish_attested", None)
    if fn is None:
        return None

    def publish(p: Principal, space_ref: str, ops: list[dict[str, Any]],
                provenance: dict[str, str]) -> dict[str, Any]:
        assert fn is not None
        with hub.store.read() as conn:
            space, _ = space_access_txn(conn, p, space_ref, "viewer")
        attested = attested_cls(agent="", agent_user=p.user_id, approved_by=p.user_id)
        out = fn(hub.store, hub.key, hub.settings, member=p, space_id=space.id,
                 ops=[Op(make_entry(o["entry"]), o["base"]) for o in ops],
                 attested=attested, now=hub.now, client="quire-console",
                 tool=provenance.get("tool", TOOL), hooks=getattr(hub, "hooks", None))
        hub.published(out)  # in-process event streams (others heard the NOTIFY)
        return {"seq": out.seq}
    return publish
