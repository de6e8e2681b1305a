"""A space's folder mapping (decisions.md D152): which folder gives its files which kind
(``{"Skills": "skill", "team/rules": "guardrail"}``), consulted by shared/kinds.py
``effective_kind`` after front matter ``kind:`` and before the default layout (a first
folder that is a kind word). Admins set it; every member reads it (the head carries it, so
the replica computes the kinds the guard computes).

    set_kinds: admin, direct  ──► parse (shared/kinds.py parse_folders)
        ──► every live entry under a folder whose mapping changes: kind before and after
            ──► one that would become or stop being a guardrail: refused (kinds_in_use),
                nothing changed (its key digest and its judgement stay what they were)
        ──► stored on the space row, rules_version bumped (a batch prepared under the old
            mapping is refused ``rules_changed`` at commit and retried), audited
            ``space.kinds``; read rules naming kinds judge them under it from the next
            read on (hub/scope.py ``scope_txn``); ``dry_run``: who would stop or start
            reading what (``read_impact``)
"""

from __future__ import annotations

import json
from typing import Any

from hub import audit
from hub.access import Principal, space_access_txn
from hub.admin import direct
from hub.scope import is_read_rule, read_impact_txn
from hub.store.db import Store
from hub.store.rules import list_rules_txn
from hub.store.spaces_sql import bump_rules_version_txn, live_under_txn, set_kinds_txn
from shared.errors import InvalidRequest
from shared.kinds import GUARDRAIL, effective_kind, parse_folders

SAMPLE = 20  # entries named in a kinds_in_use refusal


def show_kinds(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    """The space's folder mapping (any member: the replica needs it to compute kinds)."""
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
    return {"space": space.id, "kinds": space.folders, "rules_version": space.rules_version}


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(f for f in {*before, *after} if before.get(f) != after.get(f))


def _guardrail_flips_txn(conn: Any, space_id: str, folders: list[str],
                         before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The live entries under ``folders`` that are a guardrail under one mapping and not
    under the other (their kind decides how the guard judges them and their key digest)."""
    out: list[str] = []
    for folder in folders:
        prefix = folder + "/"
        for eid, content in live_under_txn(conn, space_id, prefix):
            meta = json.loads(content).get("meta") or {}
            was = effective_kind(eid, meta, before) == GUARDRAIL
            if was != (effective_kind(eid, meta, after) == GUARDRAIL):
                out.append(eid)
    return sorted(set(out))


def set_kinds(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int
              ) -> dict[str, Any]:
    """Replace the space's folder mapping with ``body["kinds"]`` (``{}``: the default
    layout). ``dry_run``: every check, nothing written."""
    direct(p)
    try:
        after = parse_folders(body.get("kinds"))
    except ValueError as e:
        raise InvalidRequest(str(e), {"reason": "bad_kinds"}) from None
    dry = body.get("dry_run", False)
    if not isinstance(dry, bool):
        raise InvalidRequest("dry_run must be true or false")

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        before = space.folders
        changed = _changed(before, after)
        flips = _guardrail_flips_txn(conn, space.id, changed, before, after)
        if flips:
            raise InvalidRequest(
                f"{len(flips)} live entr{'y' if len(flips) == 1 else 'ies'} would become or "
                f"stop being a guardrail ({', '.join(flips[:3])}"
                f"{', …' if len(flips) > 3 else ''}); give them `kind:` in front matter or "
                "move them first", {"reason": "kinds_in_use", "entries": flips[:SAMPLE],
                                    "count": len(flips)})
        out = {"space": space.id, "kinds": after, "previous": before, "changed": changed,
               "rules_version": space.rules_version + (1 if changed else 0),
               "dry_run": dry}
        if dry and changed:  # read rules naming kinds judge them under the mapping
            rules = list_rules_txn(conn, space.id)
            if any(r.get("kinds") for r in rules if is_read_rule(r)):
                out["read_impact"] = read_impact_txn(conn, space, rules, rules, after)
        if dry or not changed:
            return out
        set_kinds_txn(conn, space.id, after)
        bump_rules_version_txn(conn, space.id)  # the guard compares it at commit
        audit.record_space_txn(conn, space, at=now, action="space.kinds", actor=p.actor(),
                               details={"kinds": after, "previous": before})
        return out

    return store.run_write(txn)
