"""``quire admin epoch bump SPACE --reason TEXT --fork EVIDENCE``: a hub owner recovers a
space whose hub showed two histories (docs/security.md, "The log and its witnesses";
decisions.md D146). Run against the copy of the hub whose history survives.

    EVIDENCE (the pair ``quire verify --evidence`` checks) ──POST …/epoch {reason, fork}──▶
        a new epoch whose hub-signed statement names both checkpoints (``forked``), its
        leaf in this hub's log, an audit event (epoch.bump with ``forked``)
    GET …/head (its checkpoint), …/log/inclusion (the new epoch's leaf in it), …/witnesses
        ──POST <witness>/release──▶ each listed witness clears its refusal and takes this
        line (hub/witness/app.py ``release``: it checks the statement and the proof itself)
    replicas, at their next sync: the new epoch; those that held the other history drop
        the checkpoint they kept and republish what they hold from it, once
        (replica/engine/forked.py)
"""

from __future__ import annotations

from typing import Any

from replica.hubclient import witness
from replica.hubclient.client import HubClient
from replica.trust.verify import new_nonce
from shared import tlog
from shared.errors import QuireError


def recover(c: HubClient, space: str, reason: str, pair: list[Any], dry_run: bool = False
            ) -> dict[str, Any]:
    """The bump's answer, with ``witnesses``: for each listed witness, released or why not
    (one that did not answer keeps refusing the space: its operator can start the line
    over with ``quire witness forget``). ``dry_run``: the hub checks the evidence and says
    what the bump would do; nothing is written, no witness is asked."""
    res = c.bump_epoch(space, reason, dry_run, fork=pair)
    if res.get("dry_run"):
        return dict(res, witnesses=[])
    return dict(res, witnesses=release_all(c, res["space"], res["epoch"], res["statement"]))


def release_all(c: HubClient, space_id: str, epoch: str, statement: dict[str, Any]
                ) -> list[dict[str, Any]]:
    """Hand each witness of the space's policy the recovery: the head's checkpoint, the
    statement, and the new epoch's leaf in that checkpoint's log."""
    note = c.head(space_id, nonce=new_nonce())["signed"].checkpoint
    path = f"/v1/spaces/{space_id}"
    size = tlog.parse_checkpoint(tlog.parse_note(note).body).size
    leaf = c.admin_get(f"{path}/log/inclusion", {"epoch": epoch, "seq": 0, "size": size})
    policies = (c.admin_get(f"{path}/witnesses") or {}).get("policies") or []
    out: list[dict[str, Any]] = []
    for w in policies[-1]["witnesses"] if policies else []:
        try:
            witness.release(w["url"], {"note": note, "statement": statement, "leaf": leaf})
            out.append({"name": w["name"], "released": True})
        except (witness.WitnessRefused, QuireError) as e:
            out.append({"name": w["name"], "released": False, "error": str(e)[:300]})
    return out
