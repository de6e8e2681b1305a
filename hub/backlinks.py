"""Backlinks at the hub: the live entries whose links find a page (docs/decisions.md D132
part 6, D145), for the remote read API (``GET /v1/spaces/{space}/backlinks?id=``), ``quire
read PAGE --backlinks --remote`` and the console's page view.

    the read index's full text (hub/store/read_index.py): entries holding the first word of
    the page's last path segment, at most MAX_CANDIDATES  (the prefilter, one query)
      └─ each parsed (shared/links.py); a Markdown link must name the page's path, a
         ``[[wikilink]]`` must resolve to it as replicas resolve it (hub/wikilinks.py)

Read rules apply as to every read (hub/scope.py): the page itself must be readable (else
``not_found``), a hidden source is never listed, and a hidden entry is never a candidate
that a wikilink could have found instead. A page whose name holds no word (letters or
digits) has no candidates; a link in an entry's ``links`` front-matter field is not
counted here (the replica's index counts it). ``more`` says the prefilter was cut.
"""

from __future__ import annotations

from typing import Any

from hub import reads, wikilinks
from hub import scope as scopes
from hub.access import Principal
from hub.store import read_index as ri
from hub.store.db import Store
from shared import links
from shared.errors import InvalidRequest, NotFound
from shared.names import fold
from shared.search import search_terms

MAX_CANDIDATES = 1000  # entries holding the word, parsed per call
MAX_RESULTS = 500


def backlinks(store: Store, p: Principal, space_ref: str, entry_id: str) -> dict[str, Any]:
    tail = entry_id.rsplit("/", 1)[-1]
    try:
        words = search_terms(tail)[:1]
    except InvalidRequest:
        words = []
    out: list[dict[str, str]] = []
    more = False
    with reads.indexed(store, p, space_ref) as (conn, space, state, scope):
        if ri.live_entry_txn(conn, space.id, entry_id) is None or not (
                scope.unrestricted or scopes.visible_txn(conn, space.id, scope, [entry_id])):
            raise NotFound(f"no entry {entry_id}", {"reason": "no_entry"})
        rows: list[tuple[str, str, str]] = []
        if words:
            _, rows = ri.search_txn(conn, space.id, words, MAX_CANDIDATES + 1)
            more = len(rows) > MAX_CANDIDATES
            rows = rows[:MAX_CANDIDATES]
        visible = wikilinks.visible_in(conn, space.id, scope)
        shown = visible({r[0] for r in rows})
        want = fold(tail)
        for src, title, body in rows:
            if src == entry_id or src not in shown:
                continue
            via = _finds(conn, space.id, src, body, entry_id, want, visible)
            if via is not None:
                out.append({"id": src, "title": title, "via": via})
    out.sort(key=lambda b: b["id"])
    return {"head": {"epoch": state[0], "seq": state[1]}, "id": entry_id,
            "backlinks": out[:MAX_RESULTS], "more": more or len(out) > MAX_RESULTS}


def _finds(conn: Any, space_id: str, src: str, body: str, entry_id: str, want: str,
           visible: Any) -> str | None:
    """How ``body`` of ``src`` links to ``entry_id`` (``wikilink``, ``markdown``), or None."""
    for link in links.parse(body):
        if link.via == links.MARKDOWN:
            if links.resolve_markdown(src, link.target) == entry_id:
                return links.MARKDOWN
        elif link.target and fold(link.target.rsplit("/", 1)[-1].removesuffix(".md")) == want:
            found, _ = wikilinks.candidates_txn(conn, space_id, src, link.target, True, visible)
            if links.resolve_wikilink(src, link.target, links.Names(found)) == entry_id:
                return links.WIKILINK
    return None
