"""Open conflicts reported by replicas (docs/console.md, "Open conflicts"): a replica's
summary of the conflicts it holds, so the console can show them without anyone cloning the
space.

    replica: after a sync whose open conflicts changed (replica/conflicts/report.py)
      PUT /v1/spaces/{space}/replicas/{replica}/conflicts  {"conflicts": [item, ...]}
        └─ put_report(): member of the space (viewer up), the replica registered to the
           caller's device there and not revoked (check_replica_txn), the body validated;
           the report replaces that replica's previous one, in one transaction; the
           member's reports in the space (all their live replicas) stay within
           ``conflict_reports_per_member`` (more: ``quota_exceeded``, nothing replaced)
    console: GET /console/spaces/{space}/conflicts?page=N ─> list_reports() (members),
           ``PAGE`` rows a page

An item is a summary, never content: ``{"id": packet id, "entry": entry id, "kind":
"edit"|"edit_delete"|"create_create", "since": Unix ms, "claimed": bool}``, at most
``MAX_ITEMS`` of them (more: ``too_large``; a replica reports its first ``MAX_ITEMS``).
Reports of revoked replicas are not listed.
"""

from __future__ import annotations

import re
from typing import Any

from hub import scope as scopes
from hub.access import Principal, check_replica_txn, space_access_txn
from hub.store.conflict_reports_sql import (
    count_reports_txn,
    list_reports_txn,
    member_rows_txn,
    replace_report_txn,
)
from hub.store.db import Store
from shared.errors import InvalidRequest, QuotaExceeded, TooLarge
from shared.ids import is_entry_id, is_id

MAX_ITEMS = 500
PAGE = 200  # conflicts a console page lists
MAX_BODY = 128 * 1024  # 500 items of the longest entry ids fit
KINDS = ("edit", "edit_delete", "create_create")
ITEM_FIELDS = {"id", "entry", "kind", "since", "claimed"}
_PACKET = re.compile(r"^pk-[0-9a-f]{20}$")
_MAX_MS = 2**53


def parse_report(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's items, checked; any problem refuses the whole report."""
    items = body.get("conflicts")
    if not isinstance(items, list):
        raise InvalidRequest("conflicts must be a list of conflict summaries",
                             {"field": "conflicts"})
    if len(items) > MAX_ITEMS:
        raise TooLarge(f"a report holds at most {MAX_ITEMS} conflicts",
                       {"field": "conflicts", "limit": MAX_ITEMS})
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, it in enumerate(items):
        where = {"field": f"conflicts[{i}]"}
        if not isinstance(it, dict) or set(it) != ITEM_FIELDS:
            raise InvalidRequest("each conflict has exactly id, entry, kind, since, claimed",
                                 where)
        if not (isinstance(it["id"], str) and _PACKET.match(it["id"])):
            raise InvalidRequest("id must be a packet id (pk-...)", where)
        if not (isinstance(it["entry"], str) and is_entry_id(it["entry"])):
            raise InvalidRequest("entry must be an entry id", where)
        if it["entry"] in seen:
            raise InvalidRequest("an entry is reported at most once", where)
        seen.add(it["entry"])
        if it["kind"] not in KINDS:
            raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}", where)
        since = it["since"]
        if not (isinstance(since, int) and not isinstance(since, bool)
                and 0 <= since < _MAX_MS):
            raise InvalidRequest("since must be Unix milliseconds", where)
        if not isinstance(it["claimed"], bool):
            raise InvalidRequest("claimed must be true or false", where)
        out.append(dict(it))
    return out


def put_report(store: Store, p: Principal, space_ref: str, replica_id: str,
               body: dict[str, Any], now: int, *, max_rows: int = 0) -> dict[str, Any]:
    """Replace ``replica_id``'s report with ``body``'s conflicts (its own device only).
    ``max_rows``: the most the member's replicas may report in the space together (0: no
    limit); a report past it is refused and the replica's previous report stays."""
    if not is_id(replica_id):
        raise InvalidRequest("replica must be a canonical id", {"field": "replica"})
    items = parse_report(body)

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        # the ownership check: registered to the caller's device in this space, live
        check_replica_txn(conn, p, replica_id, space.id)
        if max_rows and items and p.user_id:
            others = member_rows_txn(conn, space.id, p.user_id, replica_id)
            if others + len(items) > max_rows:
                raise QuotaExceeded(
                    f"your replicas of space {space.name} would report {others + len(items)}"
                    f" conflicts; at most {max_rows} are kept per member (resolve some, or "
                    "have an admin revoke replicas no longer used)",
                    {"limit": max_rows, "measure": "conflict_reports",
                     "reported": others, "this_report": len(items)})
        replace_report_txn(conn, replica_id, [
            {"replica_id": replica_id, "entry_id": it["entry"], "space_id": space.id,
             "packet_id": it["id"], "kind": it["kind"], "since": it["since"],
             "claimed": it["claimed"], "reported_by": p.user_id, "reported_at": now}
            for it in items])
        return {"space": space.id, "replica": replica_id, "conflicts": len(items),
                "reported_at": now}

    return store.run_write(txn)


def list_reports(store: Store, p: Principal, space_ref: str, page: int = 1,
                 per_page: int = PAGE) -> dict[str, Any]:
    """The live replicas' reported conflicts in a space (members), by entry then replica,
    with who and which device reported them: page ``page`` (from 1) of ``per_page``, and
    the totals (``total``, ``entries``, ``pages``)."""
    page = max(1, page)
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        scope = scopes.scope_txn(conn, p, space, role)
        if scope.unrestricted:
            total, entries = count_reports_txn(conn, space.id)
            rows = list_reports_txn(conn, space.id, limit=per_page,
                                    offset=(page - 1) * per_page)
        else:  # reports on entries it may not read are not there for this reader
            every = list_reports_txn(conn, space.id)
            seen = scopes.visible_txn(conn, space.id, scope, [r.entry_id for r in every])
            kept = [r for r in every if r.entry_id in seen]
            total, entries = len(kept), len({r.entry_id for r in kept})
            rows = kept[(page - 1) * per_page:page * per_page]
    return {"space": space.id, "total": total, "entries": entries, "page": page,
            "pages": max(1, -(-total // per_page)), "conflicts": [
        {"id": r.packet_id, "entry": r.entry_id, "kind": r.kind, "since": r.since,
         "claimed": bool(r.claimed), "replica": r.replica_id, "replica_name": r.replica_name,
         "device": r.device_name, "user": r.user_id, "user_name": r.user_name,
         "reported_at": r.reported_at} for r in rows]}
