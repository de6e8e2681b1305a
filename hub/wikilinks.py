"""Which live entry a ``[[wiki link]]`` names, as the replica reads it
(replica/app/page_text.py ``wikilink_target``): for ``[[name]]`` in entry ``source``,

    1. an entry whose id is ``name``
    2. else ``<source's kind>/name``
    3. else the first entry, by id, whose id ends with ``/name`` (case-insensitively)

and none when nothing matches (the console then shows the link as text). Steps 1 and 2
are lookups by key; step 3 scans the space's ids, so at most ``MAX_TAIL_SCANS`` names a
call take it (the rest stay text). For members
(the space's viewer check); the console renders the links (hub/console/markdown.py). A
name that resolves to an entry outside the reader's read scope (hub/scope.py, D142) stays
unresolved, as if nothing matched: a link must not tell that a hidden entry exists.
"""

from __future__ import annotations

from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.store.db import Store
from hub.store.wikilinks_sql import first_with_tail_txn, live_txn

MAX_NAMES = 200  # names resolved in one call (hub/console/markdown.py asks for no more)
MAX_TAIL_SCANS = 50  # names looked up by their last segment (a scan of the space's ids)


def resolve(store: Store, p: Principal, space_ref: str, source: str, names: set[str]
            ) -> dict[str, str]:
    """``{name: entry id}`` for each name in ``names`` that resolves to a live entry."""
    out: dict[str, str] = {}
    kind = source.split("/", 1)[0]
    scans = 0
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        for raw in sorted(names)[:MAX_NAMES]:
            name = raw.strip().removesuffix(".md")
            if not name or len(name) > 240:
                continue
            if live_txn(conn, space.id, name):
                out[raw] = name
            elif live_txn(conn, space.id, f"{kind}/{name}"):
                out[raw] = f"{kind}/{name}"
            elif scans < MAX_TAIL_SCANS:
                scans += 1
                found = first_with_tail_txn(conn, space.id, name)
                if found is not None:
                    out[raw] = found
        scope = scopes.scope_txn(conn, p, space, role)
        if not scope.unrestricted:
            seen = scopes.visible_txn(conn, space.id, scope, out.values())
            out = {k: v for k, v in out.items() if v in seen}
    return out
