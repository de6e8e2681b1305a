"""Crossing a fork recovery (decisions.md D146; replica/app/fork_recovery.py): what this
replica republishes.

The hub showed two histories of the space; its owner made a new epoch on the copy whose
history survives, and its signed statement carries the proof (``forked``). A replica that
held the other history holds batches the surviving one never had: pulled from others or
its own. Taking the snapshot the usual way would drop them (their entries are absent or
older there, and nothing local is dirty). Instead, before the snapshot:

    history rows (kind batch or push) of the epoch the statement ends, by seq
      past its previous_seq                          ──▶ not in the surviving history
      up to it: the last whose head is the surviving log's leaf at that seq (binary
      search: heads chain, so once two histories part they never meet again; each leaf
      checked by an inclusion proof against the checkpoint just accepted)
      after that one                                  ──▶ not in the surviving history
        ──▶ their entry ids: republished by the snapshot merge exactly as a restore's are
            (replica/engine/restored.py): synced ← the surviving state, local ← held

Several replicas holding the same change all try; the first batch wins and the others'
pushes meet ``head_changed``, pull it and find local == theirs: each change once. A replica
whose head is where the surviving history ended asks nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from replica.store.db import Conn
from replica.store.store import Head
from shared.signed import EpochStatement

Row = tuple[int, str, list[str]]  # seq, head digest after it, entry ids


def history_rows_txn(conn: Conn, epoch: str) -> list[Row]:
    """The batches this replica pulled or published in ``epoch``, by seq."""
    return [(int(seq), str(head), json.loads(entries)) for seq, head, entries in conn.execute(
        "SELECT seq, head, entries FROM history WHERE epoch = ? AND kind IN ('batch', 'push') "
        "ORDER BY seq", (epoch,))]


def lost_ids(head: Head | None, rows: list[Row], recovery: EpochStatement,
             on_line: Callable[[int, str], bool]) -> set[str]:
    """Entry ids of the ``rows`` the surviving history does not hold (above);
    ``on_line(seq, head)``: is that head the surviving log's at that seq."""
    if head is not None and (head.epoch, head.seq, head.digest) == (
            recovery.previous, recovery.previous_seq, recovery.previous_digest):
        return set()  # we are where the surviving history ended: nothing of ours is lost
    within = [r for r in rows if r[0] <= recovery.previous_seq]
    lo, hi = 0, len(within)  # within[:lo] on the line, within[hi:] not
    if within and on_line(within[-1][0], within[-1][1]):
        lo = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if on_line(within[mid][0], within[mid][1]):
            lo = mid + 1
        else:
            hi = mid
    lost = within[lo:] + [r for r in rows if r[0] > recovery.previous_seq]
    return {eid for r in lost for eid in r[2]}
