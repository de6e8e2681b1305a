"""The store's links index: which entries link to which, for backlinks and the links a sync
leaves dangling (docs/decisions.md D132 part 6, D145; parsing and resolving: shared/links.py).

    entries ──triggers──► links_stale (ids whose local state changed, any code path)
    refresh_txn: each stale id's local entry parsed ──► links (src, target, via, tail)
    backlinks_txn(X): rows whose tail is X's last segment, folded ──resolve──► sources of X
    dangling_txn(touched): links of the touched pages, and links to them, that find nothing

A row keeps the target as written (a wikilink's name), not the entry it found: which entry
``[[Plan]]`` finds changes when another ``Plan`` is created nearer, so links are resolved
when asked, against the ids live at that moment. A store that never built the index, or a
first clone (triggers off: replica/store/store.py ``triggers_on_txn``), rebuilds it whole
at the next read.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from replica.store.schema import LINKS_BUILT
from shared import links
from shared.entry import Entry
from shared.names import fold

LINKS_FIELD = "links"  # via: the entry's ``links`` front-matter field (entry ids)


def _tail(target: str) -> str:
    return fold(target.rsplit("/", 1)[-1])


def rows_of(e: Entry) -> set[tuple[str, str, str]]:
    """(target, via, tail) of each link ``e`` makes."""
    out = {(t, LINKS_FIELD, _tail(t)) for t in e.links}
    for link in links.parse(e.body):
        if link.via == links.MARKDOWN:
            target = links.resolve_markdown(e.id, link.target)
        else:
            target = unicodedata.normalize("NFC", link.target.strip()).removesuffix(
                ".md").strip("/") or None
        if target is not None:
            out.add((target, link.via, _tail(target)))
    return out


def live_ids_txn(conn: Conn) -> set[str]:
    """The entries this machine has (its local states), from the covering index."""
    return {r[0] for r in st.live_versions_txn(conn) if r[2] is not None}


def refresh_txn(conn: Conn, at_most: int | None = None) -> list[str] | None:
    """Bring the index up to date; the ids it parsed again. ``at_most``: do nothing and
    return None when more than that many entries wait (a rebuild after a clone is left to
    the first read that needs it)."""
    whole = not st.get_meta_txn(conn, LINKS_BUILT, False)
    table = "entries" if whole else "links_stale"
    cap = "" if at_most is None else f" LIMIT {int(at_most) + 1}"  # never reads them all
    ids = [r[0] for r in conn.execute(f"SELECT id FROM {table}{cap}")]
    if at_most is not None and len(ids) > at_most:
        return None
    if whole:
        conn.execute("DELETE FROM links")
    rows: list[tuple[str, str, str, str]] = []
    for eid in ids:
        conn.execute("DELETE FROM links WHERE src = ?", (eid,))
        local = st.get_state_txn(conn, eid).local
        if local is not None and not local.deleted:
            rows += [(eid, *r) for r in rows_of(local)]
    cur = conn.connection.cursor()
    try:
        cur.executemany("INSERT OR IGNORE INTO links (src, target, via, tail)"
                        " VALUES (?, ?, ?, ?)", rows)
    finally:
        cur.close()
    conn.execute("DELETE FROM links_stale")
    st.set_meta_txn(conn, LINKS_BUILT, True)
    return ids


def _finds(src: str, target: str, via: str, names: links.Names) -> str | None:
    if via == links.WIKILINK:
        return links.resolve_wikilink(src, target, names)
    return target if target in names.ids else None


def backlinks_txn(conn: Conn, entry_id: str, names: links.Names | None = None
                  ) -> list[dict[str, str]]:
    """``[{"id", "via"}]`` of each entry whose links find ``entry_id``, sorted by id;
    ``names``: the ids to resolve against (default: those live here now)."""
    refresh_txn(conn)
    if names is None:
        names = links.Names(live_ids_txn(conn))
    out: dict[str, str] = {}
    for src, target, via in conn.execute(
            "SELECT src, target, via FROM links WHERE tail = ? ORDER BY src, via",
            (_tail(entry_id),)):
        if src != entry_id and src not in out and _finds(src, target, via, names) == entry_id:
            out[src] = via
    return [{"id": s, "via": v} for s, v in sorted(out.items())]


def dangling_txn(conn: Conn, touched: list[str], limit: int = 50) -> list[dict[str, Any]]:
    """``[{"page", "links": [target as written]}]``: the live pages among ``touched``, and
    the pages linking to a name one of them had, whose links now find nothing; at most
    ``limit`` pages."""
    if not touched:
        return []
    names = links.Names(live_ids_txn(conn))
    tails = {_tail(t) for t in touched}
    own = {t for t in touched if t in names.ids}
    sources = set(own)
    ordered = sorted(tails)
    for i in range(0, len(ordered), 500):
        part = ordered[i:i + 500]
        sources |= {r[0] for r in conn.execute(
            f"SELECT DISTINCT src FROM links WHERE tail IN ({', '.join('?' * len(part))})",
            part)}
    out = []
    for src in sorted(sources):
        if src not in names.ids:
            continue
        gone = sorted({target for target, via, tail in conn.execute(
            "SELECT target, via, tail FROM links WHERE src = ?", (src,))
            if (src in own or tail in tails) and _finds(src, target, via, names) is None})
        if gone:
            out.append({"page": src, "links": gone})
            if len(out) >= limit:
                break
    return out
