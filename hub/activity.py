"""A space's activity: who changed what, when, through which agent; newest first, a page
at a time (the console's *Activity* page, docs/console.md).

    activity(store, p, space, epoch=None, before=None)
      batches of the epoch (the current one unless ``epoch``) below seq ``before``
        ──► per batch: when, author (user, device, agent), provenance, and per op
            what it did: created (lines), edited (+added -removed lines; fields),
            deleted, and, from the provenance's tool, restored or reverted
      ``next``: the seq to pass as ``before`` for older ones, or ``older_epoch``: the
      epoch before this one once this one is exhausted

Reads what a member already reads (the space's viewer check): the same batches the
history and the changes feed serve, less what the reader's read rules leave out (ops on
entries outside its scope, hub/scope.py, judged in the page's transaction; a batch of only
those is not listed). The line counts compare each put with the entry's
version just before the batch, from the read index (hub/reads.py keeps it current); a
batch with more than ``OPS_SHOWN`` ops lists that many and counts the rest.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from hub import reads
from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.store import read_index as ri
from hub.store.activity_sql import epochs_txn, newest_txn
from hub.store.db import Store

PAGE = 30  # batches per page
OPS_SHOWN = 20  # ops described per batch
TOOLS = {"admin revert": "reverted", "console restore": "restored", "quire restore": "restored"}
_FIELDS = ("title", "tags", "links", "meta")


def _before_txn(conn: Any, space_id: str, entry_id: str, epoch: str, seq: int
                ) -> dict[str, Any] | None:
    """The entry as it was just before batch ``seq`` of ``epoch`` (None: absent or deleted)."""
    row = ri.version_at_txn(conn, space_id, entry_id, epoch, seq - 1)
    if row is None or row.deleted:
        return None
    return ri.put_in_batch_txn(conn, space_id, row.src_epoch, row.src_seq, entry_id)


def _op_id(op: dict[str, Any]) -> str:
    return str(op["entry"]["id"] if op["op"] == "put" else op["id"])


def _lines(text: str) -> list[str]:
    return text.splitlines()


def describe(op: dict[str, Any], old: dict[str, Any] | None, tool: str | None
             ) -> dict[str, Any]:
    """What one op did, for people: ``{id, action, added, removed, fields}``."""
    if op["op"] == "delete":
        return {"id": op["id"], "action": "deleted"}
    new = op["entry"]
    action = TOOLS.get(tool or "") or ("created" if old is None else "edited")
    if "from" in op:  # a rename (docs/protocol.md, "Renames"): ``old`` is the old name's
        action = "renamed"
    a, b = _lines((old or {}).get("body", "")), _lines(new.get("body", ""))
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False
                                                       ).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    fields = [f for f in _FIELDS if (old or {}).get(f) != new.get(f) and old is not None]
    return {"id": new["id"], "action": action, "added": added, "removed": removed,
            "fields": fields, **({"from": op["from"]} if "from" in op else {})}


def activity(store: Store, p: Principal, space_ref: str, *, epoch: str | None = None,
             before: int | None = None, limit: int = PAGE) -> dict[str, Any]:
    """A page of the space's batches, newest first (module docstring)."""
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
    reads.catch_up(store, space.id)
    e = epoch or space.epoch
    out = []
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        scope = scopes.scope_txn(conn, p, space, role)
        epochs = epochs_txn(conn, space.id)
        rows = newest_txn(conn, space.id, e, before if before is not None else 2 ** 62,
                          limit + 1)
        for row in rows[:limit]:
            b = json.loads(row.body)
            prov = b.get("provenance") or {}
            every = b["ops"]
            if not scope.unrestricted:
                seen = scopes.visible_txn(conn, space.id, scope, [_op_id(op) for op in every])
                every = [op if "from" not in op or op["from"] in seen else  # name untold
                         {k: v for k, v in op.items() if k != "from"}
                         for op in every if _op_id(op) in seen]
                if not every:
                    continue  # nothing in it this reader may read
            # a rename is one change: its put (``from``) says it, its delete is not listed
            moved = {op["from"] for op in every if op["op"] == "put" and "from" in op}
            every = [op for op in every if op["op"] == "put" or op["id"] not in moved]
            ops = [describe(op, None if op["op"] == "delete" else
                            _before_txn(conn, space.id, op.get("from") or op["entry"]["id"],
                                        e, row.seq),
                            prov.get("tool"))
                   for op in every[:OPS_SHOWN]]
            out.append({"epoch": e, "seq": row.seq, "accepted_at": row.accepted_at,
                        "author": {"user": row.user_id, "device": row.device_id,
                                   "agent": row.agent},
                        "provenance": prov, "ops": ops,
                        "more_ops": max(0, len(every) - OPS_SHOWN)})
    prior = [x for x in epochs if x < e]  # epoch ids sort by creation time
    older = prior[-1] if prior and len(rows) <= limit else None
    return {"head": {"epoch": space.epoch, "seq": space.head_seq}, "epoch": e,
            "changes": out, "next": rows[limit - 1].seq if len(rows) > limit else None,
            "older_epoch": older}
