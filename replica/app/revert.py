"""``quire admin revert SPACE SEQ [--dry-run]``: undo one accepted batch with a new one.

    plan()    for each entry the batch at SEQ changed: its state right before SEQ and its
              version now (the hub's remote read API); an entry changed again since SEQ is
              reported as a conflict and left alone, never overwritten
    revert()  publishes the compensating batch through the guard like any other: signed by
              this device's key, as this member, base = each entry's version now (so an
              entry that changes meanwhile is refused with base_mismatch, not overwritten);
              provenance says which seq it reverts
    block()   with ``--block``: first a dry run of the block (space admins only: an
              editor's ``--block`` is refused before the revert is published); after the
              revert, the versions it took away (entry id + the exact
              version SEQ wrote; deletions are not blocked) are recorded on the hub as
              blocked (POST …/blocks, audited): the guard refuses them from then on
              (``version_blocked``) and a replica that still holds one as a local edit
              keeps it as a held conflict (replica/engine/push.py); ``--dry-run`` lists them

The history keeps both the batch and its revert: nothing is rewritten (removing content from
history is ``purge``, a different tool).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from shared.entry import make_entry, tombstone
from shared.errors import InvalidRequest, NotFound
from shared.ids import new_id
from shared.wire import Op, build_batch

if TYPE_CHECKING:
    from replica.hubclient.client import HubClient


@dataclass
class RevertPlan:
    space: str
    seq: int
    epoch: str
    ops: list[Op] = field(default_factory=list)
    restored: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"space": self.space, "seq": self.seq, "epoch": self.epoch,
                "restored": self.restored, "conflicts": self.conflicts,
                "unchanged": self.unchanged}

    def reverted_versions(self) -> list[dict[str, str]]:
        """What ``--block`` blocks: each restored entry's version written at SEQ, unless
        SEQ deleted it (a deletion is not content to keep out)."""
        return [{"id": r["id"], "version": r["reverted"]} for r in self.restored
                if not r.get("reverted_deleted")]


def _path(space: str, what: str) -> str:
    return f"/v1/spaces/{quote(space, safe='')}/{what}"


def plan_entry(entry_id: str, written: str, before: dict[str, Any] | None,
               now_version: str, now_seq: int) -> tuple[Op | None, dict[str, Any]]:
    """Pure: the op that restores ``before`` (None: absent) over the entry as it is now,
    or None with the reason when it must not or need not be touched."""
    if now_version != written:
        return None, {"id": entry_id, "reason": "changed since", "changed_seq": now_seq}
    if before is None:
        return Op(tombstone(entry_id), now_version), {"id": entry_id, "action": "delete"}
    entry = make_entry(before)
    if entry.version == now_version:
        return None, {"id": entry_id, "reason": "already as before"}
    return Op(entry, now_version), {"id": entry_id, "action": "restore"}


def plan(client: HubClient, space: str, seq: int) -> RevertPlan:
    if seq < 1:
        raise InvalidRequest("SEQ must be the seq of an accepted batch (>= 1)")
    b = client.admin_get(_path(space, "batch"), {"seq": seq})
    out = RevertPlan(space=space, seq=seq, epoch=b["epoch"])
    for o in b["ops"]:
        eid = o["id"]
        try:
            before = client.admin_get(_path(space, "entry"),
                                      {"id": eid, "seq": seq - 1})["entry"]
        except NotFound:
            before = None
        newest = client.admin_get(_path(space, "history"), {"id": eid, "limit": 1})
        now = newest["versions"][0]
        op, note = plan_entry(eid, o["version"], before, now["version"], now["seq"])
        if op is not None:
            out.ops.append(op)
            out.restored.append(dict(note, reverted=o["version"],
                                     reverted_deleted=o.get("op") == "delete"))
        elif note["reason"] == "changed since":
            out.conflicts.append(note)
        else:
            out.unchanged.append(eid)
    return out


def revert(client: HubClient, key: Any, space: str, p: RevertPlan) -> dict[str, Any]:
    """Publish the plan's compensating batch; returns the hub's verified receipt."""
    if not p.ops:
        raise InvalidRequest("nothing to revert: every entry changed since, or is already "
                             "as before", p.to_json())
    head = client.head(space)
    if head["epoch"] != p.epoch:
        raise InvalidRequest("the space moved to another epoch since this batch")
    replica_id = client.register_replica(space, "admin-revert")
    batch = build_batch(key, batch_id=new_id(), replica_id=replica_id, space=head["space"],
                        epoch=head["epoch"], parent_seq=head["seq"],
                        parent_digest=head["digest"], ops=p.ops,
                        provenance={"tool": "admin revert", "note": f"reverts seq {p.seq}"})
    return client.push(head["space"], batch)


BLOCK_CHUNK = 100  # versions a request (hub/blocks.py MAX_VERSIONS)


def block(client: HubClient, space: str, p: RevertPlan, *, dry_run: bool) -> list[dict[str, Any]]:
    """Record the plan's reverted versions as blocked on the hub (or, ``dry_run``, ask
    the hub what it would record); the hub's answer for each."""
    versions = p.reverted_versions()
    out: list[dict[str, Any]] = []
    for i in range(0, len(versions), BLOCK_CHUNK):
        answer = client.admin_post(_path(space, "blocks"), {
            "seq": p.seq, "versions": versions[i:i + BLOCK_CHUNK], "dry_run": dry_run})
        out += answer["blocked"]
    return out
