"""What a batch may add to a space beyond its syntax: entry ids portable to every file
system a replica may run on (``shared.ids.portability_problem``), and names that are not one
file with a live entry's on macOS and Windows (``check_names_txn``, ``shared.names``).

Only entries a batch creates are judged (absent, or a tombstone being re-created): an entry
that is live already was accepted before this rule and can still be updated or deleted, so
a space holding such ids keeps working (``quire verify`` reports them). Called by the guard
while preparing; bases are re-checked under the space lock at commit, so "creates" cannot
change in between without the batch being refused anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hub.store.names_sql import live_lowered_txn
from shared.errors import InvalidRequest, PolicyDenied
from shared.ids import portability_problem
from shared.names import COLLISION, collisions, fold, portable_name


def check_portable(ops: Sequence[Any], current: dict[str, tuple[str, bool]]) -> None:
    """Refuse the batch when an op creates an entry whose id is not portable."""
    bad = []
    for i, op in enumerate(ops):
        cur = current.get(op.entry_id)
        if op.entry.deleted or (cur is not None and not cur[1]):
            continue  # deleting, or updating what is live: not a new file name
        problem = portability_problem(op.entry_id)
        if problem:
            bad.append({"op": i, "id": op.entry_id, "reason": problem,
                        "suggested": portable_name(op.entry_id)})
    if bad:
        raise InvalidRequest(f"{len(bad)} new entry id(s) cannot be files on every replica: "
                             f"{bad[0]['id']}: {bad[0]['reason']}; rename it, say to "
                             f"{bad[0]['suggested']!r}",
                             {"reason": "non_portable_id", "ops": bad})


def _lowerings(entry_id: str) -> set[str]:
    """What SQL ``lower(entry_id)`` may give for an id of the same fold: SQLite lowers ASCII
    only, PostgreSQL by its ctype (hub/store/names_sql.py)."""
    ascii_lower = "".join(c.lower() if c.isascii() else c for c in entry_id)
    return {ascii_lower, entry_id.lower(), fold(entry_id)}


def names_asked(ops: Sequence[Any], current: dict[str, tuple[str, bool]]) -> list[str]:
    """What to look the batch's creates up by (``hub/store/names_sql.py``), or [] when the
    batch creates nothing."""
    return sorted({low for eid in _creates(ops, current) for low in _lowerings(eid)})


def _creates(ops: Sequence[Any], current: dict[str, tuple[str, bool]]) -> list[str]:
    return [op.entry_id for op in ops if not op.entry.deleted and (
        current.get(op.entry_id) is None or current[op.entry_id][1])]


def check_names(ops: Sequence[Any], current: dict[str, tuple[str, bool]],
                found: list[str]) -> None:
    """Refuse (``policy_denied``, rule ``name_collision``) the batch when an op creates an
    entry whose name equals, ignoring case and Unicode normalization, a live entry's that
    the batch does not delete (``found``: the live entries ``names_asked`` found), or
    another create's: on macOS and Windows they are one file, and a member there would
    hold one of the two. Whole ids only: a folder spelled in another case is caught by the
    replica (replica/engine/push.py)."""
    creates = _creates(ops, current)
    if not creates:
        return
    gone = {op.entry_id for op in ops if op.entry.deleted}
    wanted = {fold(eid) for eid in creates}
    live = [eid for eid in found
            if eid not in gone and fold(eid) in wanted and eid not in creates]
    hit = {eid: p for eid, p in collisions(creates, live).items()
           if p.other is not None and fold(p.other) == fold(eid)}  # whole names only
    if not hit:
        return
    denied = [{"id": eid, "action": "create", "rule": COLLISION, "of": p.other,
               "suggested": p.suggested,
               "reason": f"{eid}: {p.reason}; rename it, say to {p.suggested!r}"}
              for eid, p in sorted(hit.items())]
    raise PolicyDenied(f"{len(denied)} new entry name(s) are one file with another entry's "
                       f"on macOS and Windows; the whole batch was refused: "
                       f"{denied[0]['reason']}", {"denied": denied, "reason": COLLISION})


def check_names_txn(conn: Any, space_id: str, ops: Sequence[Any],
                    current: dict[str, tuple[str, bool]]) -> None:
    """``check_names`` with its read: while preparing (hub/policy.py ``judge_txn``), so a
    collision is refused before the lock; the guard checks again under the space lock
    (hub/guard.py ``commit_txn``), where a create racing in another batch is seen. One
    indexed statement, only when the batch creates."""
    asked = names_asked(ops, current)
    if asked:
        check_names(ops, current, live_lowered_txn(conn, space_id, asked))
