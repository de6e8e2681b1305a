"""Which live entry a ``[[wiki link]]`` names: the replica's rule (shared/links.py
``resolve_wikilink``: the id as written, else next to the source, else the shortest path
ending with the name, case-insensitively), asked of the database instead of a set of every
id. For ``[[name]]`` in entry ``source``:

    1. an entry whose id is ``name``, or the path next to ``source`` (two key lookups)
    2. else the entries whose id is or ends with ``/name`` (an unindexed scan of the
       space's ids, so at most ``MAX_TAIL_SCANS`` names a call take it; the rest stay
       text), of which shared/links.py picks as the replica does

and none when nothing matches (the console then shows the link as text). For members
(the space's viewer check); the console renders the links (hub/console/markdown.py). A
name that resolves to an entry outside the reader's read scope (hub/scope.py, D142) stays
unresolved, as if nothing matched: a link must not tell that a hidden entry exists.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable
from typing import Any

from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.store.db import Store
from hub.store.wikilinks_sql import live_txn, named_txn
from shared import links

MAX_NAMES = 200  # names resolved in one call (hub/console/markdown.py asks for no more)
MAX_TAIL_SCANS = 50  # names looked up by their last segment (a scan of the space's ids)
MAX_CANDIDATES = 100  # entries ending with one name that the rule picks from


def candidates_txn(conn: Any, space_id: str, source: str, raw: str, tail_scan: bool,
                   visible: Callable[[set[str]], set[str]]) -> tuple[set[str], bool]:
    """The live entries (of those ``visible`` keeps) that ``[[raw]]`` in ``source`` may
    name, for shared/links.py to pick from, and whether it scanned by the last segment
    (``tail_scan``: it may, when nothing has the name as a path)."""
    name = unicodedata.normalize("NFC", raw.strip()).removesuffix(".md").strip("/")
    if not name or len(name) > 240:
        return set(), False
    folder = posixpath.dirname(source)
    near = posixpath.normpath(posixpath.join(folder, name)) if folder else name
    found = visible({n for n in {name, near} if live_txn(conn, space_id, n)})
    if found or not tail_scan:
        return found, False
    return visible(set(named_txn(conn, space_id, name, MAX_CANDIDATES))), True


def visible_in(conn: Any, space_id: str, scope: scopes.ReadScope
               ) -> Callable[[set[str]], set[str]]:
    """The ids of a set that ``scope`` lets its reader see."""
    def visible(ids: set[str]) -> set[str]:
        # hidden entries are never candidates: one that won the pick and was dropped
        # afterwards would tell, by the link falling to text, that it exists
        if scope.unrestricted or not ids:
            return ids
        return set(scopes.visible_txn(conn, space_id, scope, ids))
    return visible


def resolve(store: Store, p: Principal, space_ref: str, source: str, names: set[str]
            ) -> dict[str, str]:
    """``{name: entry id}`` for each name in ``names`` that resolves to a live entry."""
    out: dict[str, str] = {}
    scans = 0
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        visible = visible_in(conn, space.id, scopes.scope_txn(conn, p, space, role))
        for raw in sorted(names)[:MAX_NAMES]:
            found, scanned = candidates_txn(conn, space.id, source, raw,
                                            scans < MAX_TAIL_SCANS, visible)
            scans += scanned
            target = links.resolve_wikilink(source, raw, links.Names(found))
            if target is not None:
                out[raw] = target
    return out
