"""What each applied batch changed, page by page, for people (``quire log``, the lines
``quire sync`` and the watcher print): recorded in the store's ``history`` row of the
batch, in the transaction that applies it (a pull, or the receipt of our own push).

    pull / receipt ──► summarize(before, after per op) ──► history.detail (JSON)
                                                       └─► SyncReport.changes (this run)

A summary holds entry ids, what happened to each (``created``, ``edited`` with the body's
lines added and removed and the front-matter fields changed by name, ``deleted``,
``renamed`` from another id, ``reverted``), and the batch's provenance: never a title or
body, so a purge that removes an entry's content leaves none of it here. Pure but for
``record_txn``.
"""

from __future__ import annotations

import difflib
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from shared.entry import Entry

FIELDS = ("title", "tags", "links", "meta")
MAX_DIFF_LINES = 20_000  # a longer body is counted as replaced (no quadratic diff)


def line_counts(before: str, after: str) -> tuple[int, int]:
    """(lines added, lines removed) from ``before`` to ``after``."""
    a, b = before.splitlines(), after.splitlines()
    if len(a) + len(b) > MAX_DIFF_LINES:
        return len(b), len(a)
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False
                                                       ).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def _live(e: Entry | None) -> Entry | None:
    return None if e is None or e.deleted else e


def op_summary(entry_id: str, before: Entry | None, after: Entry | None) -> dict[str, Any]:
    """One op: ``before`` the version it replaced (None or a tombstone: absent), ``after``
    the version it wrote (None or a tombstone: a delete)."""
    b, a = _live(before), _live(after)
    if a is None:
        return {"id": entry_id, "action": "deleted",
                "removed": len(b.body.splitlines()) if b else 0}
    if b is None:
        return {"id": entry_id, "action": "created", "added": len(a.body.splitlines())}
    added, removed = line_counts(b.body, a.body)
    out: dict[str, Any] = {"id": entry_id, "action": "edited", "added": added,
                           "removed": removed}
    fields = [f for f in FIELDS if getattr(b, f) != getattr(a, f)]
    if fields:
        out["fields"] = fields
    return out


def summarize(pairs: list[tuple[str, Entry | None, Entry | None]],
              provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The detail of one batch: its ops summarized, a delete and a create of the same
    content folded into one ``renamed`` op, and a revert's ops marked ``reverted``."""
    ops = [op_summary(eid, b, a) for eid, b, a in pairs]
    gone = {eid: lb.body for eid, b, a in pairs
            if (lb := _live(b)) is not None and _live(a) is None}
    made = {eid: la.body for eid, b, a in pairs
            if (la := _live(a)) is not None and _live(b) is None}
    renamed: dict[str, str] = {}  # new id -> old id
    for new, body in made.items():
        old = next((o for o, ob in gone.items() if ob == body and o not in
                    renamed.values()), None)
        if old is not None:
            renamed[new] = old
    if renamed:
        ops = [dict(o, action="renamed", **{"from": renamed[o["id"]]}) if o["id"] in renamed
               else o for o in ops if o["id"] not in renamed.values()]
    note = str((provenance or {}).get("note") or "")
    if note.startswith("reverts seq"):
        ops = [dict(o, action="reverted", how=o["action"]) for o in ops]
    return {"ops": ops, "provenance": provenance or None}


def record_txn(conn: Conn, entry_ids: list[str], after: list[Entry | None],
               provenance: dict[str, Any] | None) -> dict[str, Any]:
    """The detail of a batch about to be applied: each op's entry as the store holds it
    synced now (read before the batch changes it)."""
    pairs = [(eid, st.get_state_txn(conn, eid).synced, a)
             for eid, a in zip(entry_ids, after, strict=True)]
    return summarize(pairs, provenance)


def pushed_key(batch_id: str) -> str:
    """The meta key of the detail of our batch the hub accepted beyond our head: the pull
    that brings it applies it as a no-op (its versions are already synced) and takes this."""
    return f"pushed_detail:{batch_id}"


def change(direction: str, *, epoch: str, seq: int, at: int | None,
           author: dict[str, Any] | None, own: bool, detail: dict[str, Any]
           ) -> dict[str, Any]:
    """One change as ``quire log`` and a sync's report list it (ids: for ``--json``;
    replica/app/changelog.py turns them into names and local times)."""
    return {"direction": direction, "epoch": epoch, "seq": seq, "at": at,
            "author": author, "own": own, "ops": detail.get("ops") or [],
            "provenance": detail.get("provenance")}
