"""Mass deletes are held until confirmed (docs/replica.md, "Mass deletes"): a sync that
would publish more deletes than a threshold publishes none of them, says so, and keeps
every one of them local (dirty in the store, gone from the vault) until ``quire sync
--confirm-deletes``. "Sync deleted my files" is the failure people report most of every
file-sync tool: an ``rm -rf vault/*``, a tool that empties a folder, a half-restored backup.
(A vault folder that is gone entirely is refused earlier, as ``vault_missing``:
replica/vault/presence.py.)

    dirty, non-held entries whose local state is a delete of a live synced version
        ──► more than ``QUIRE_DELETE_HOLD_PAGES`` (50), or more than
            ``QUIRE_DELETE_HOLD_SHARE`` (a quarter) of the space's live pages when more than
            ``QUIRE_DELETE_HOLD_MIN`` (10)?
        ──► held: the push skips them (replica/engine/push.py), ``SyncReport.deletes_held``
            says how many, of how many, which (the first few) and why

The other changes of the same sync publish as usual. The watcher never confirms: it keeps
holding them until a person runs ``quire sync --confirm-deletes`` (or puts the files back,
which makes the entries clean again). The hub holds agents to the same threshold
(hub/guard.py): a batch of an agent deleting more pages is refused unless the space's rules
allow it bulk deletes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replica.engine import renames
from replica.store import store as st
from replica.store.db import Conn

LISTED = 20  # held deletes named in a report


@dataclass(frozen=True)
class Threshold:
    pages: int = 50  # more deletes than this in one sync are held
    share: float = 0.25  # ... or more than this share of the space's live pages
    min_pages: int = 10  # (the share counts only above this many deletes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Threshold:
        e = os.environ if env is None else env
        d = cls()
        return cls(int(e.get("QUIRE_DELETE_HOLD_PAGES", d.pages)),
                   float(e.get("QUIRE_DELETE_HOLD_SHARE", d.share)),
                   int(e.get("QUIRE_DELETE_HOLD_MIN", d.min_pages)))

    def exceeded(self, deletes: int, live: int) -> str | None:
        """Why ``deletes`` of ``live`` pages are too many to publish unconfirmed; None: not."""
        if deletes > self.pages:
            return f"more than {self.pages} pages"
        if deletes > self.min_pages and deletes > self.share * live:
            return f"more than {self.share:.0%} of the space"
        return None


def pending_deletes_txn(conn: Conn) -> list[str]:
    """The local deletes the next push would publish: dirty, not held, local absent or a
    tombstone, synced live."""
    out = []
    for eid, s in st.dirty_states_txn(conn).items():
        if s.held or not s.dirty:
            continue
        if (s.local is None or s.local.deleted) and s.synced is not None \
                and not s.synced.deleted:
            out.append(eid)
    return sorted(out)


def live_count_txn(conn: Conn) -> int:
    return sum(1 for _i, synced, _l, _h in st.live_versions_txn(conn) if synced is not None)


def held_txn(conn: Conn, threshold: Threshold, confirmed: bool
             ) -> tuple[set[str], dict[str, Any] | None]:
    """(the entry ids the push must skip, the report's ``deletes_held``); nothing held when
    ``confirmed`` (``quire sync --confirm-deletes``) or under the threshold."""
    deletes = pending_deletes_txn(conn)
    if confirmed or not deletes:
        return set(), None
    # the old names of renames (a create holds their content) are no deletes of pages
    deletes = sorted(set(deletes) - renames.renamed_sources_txn(conn, deletes))
    if not deletes:
        return set(), None
    live = live_count_txn(conn)
    why = threshold.exceeded(len(deletes), live)
    if why is None:
        return set(), None
    return set(deletes), {"count": len(deletes), "of": live, "reason": why,
                          "entries": deletes[:LISTED], "more": len(deletes) > LISTED}


def describe(held: Mapping[str, Any]) -> str:
    """One sentence for people: how many deletes are held, which, why, what to do."""
    ids = [str(i) for i in held.get("entries") or ()][:5]
    more = int(held.get("count") or 0) - len(ids)
    named = ", ".join(ids) + (f" and {more} more" if more > 0 else "")
    return (f"holding {held.get('count')} deletes of the space's {held.get('of')} pages "
            f"({named}): {held.get('reason')} at once; nothing was deleted for the team. "
            "If you meant it: quire sync --confirm-deletes; if not, put the files back")
