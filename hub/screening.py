"""Screening at publication, the hub's half (docs/security.md "Screening"): the guard's
check and the admins' allows.

    guard.prepare_txn ─> check_txn(conn, space, ops, rules, provenance)
                            shared.screening.screen_entries(the entries the batch writes)
                            minus the allows of those entry versions (screening_allows),
                            plus screen_provenance(the batch's provenance)
                            └─ any left: ContentScreened, every finding in the details;
                               nothing is written
    POST /v1/spaces/{space}/screening/allows   allow()   space admins, audited
    GET  /v1/spaces/{space}/screening/allows   list_allows()   members (a replica reads
                                               them before holding back a local edit)

An allow names one entry version (the SHA-256 of its content) and one rule name, one
finding fingerprint, or ``*``: another version of the entry, even with the same secret, is
screened again. Allows only let batches through, so reading them in the preparing
transaction is enough (a batch judged without a later allow is refused; its retry is not).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hub import audit
from hub.access import Principal, space_access_txn
from hub.admin import direct
from hub.store.db import Store
from hub.store.screening_sql import (
    allows_of_txn,
    find_allow_txn,
    insert_allow_txn,
    list_allows_txn,
)
from shared import screening
from shared.errors import ContentScreened, InvalidRequest
from shared.ids import is_entry_id, new_id

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_FP = re.compile(r"^[0-9a-f]{16}$")
_RULE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_LISTED = 1000


@dataclass(frozen=True)
class Config:
    """What the guard screens with: the injection markers (defaults plus the hub's
    ``screening_injection`` setting, one regular expression a line)."""

    injection: tuple[tuple[str, re.Pattern[str]], ...] = screening.DEFAULT_INJECTION



DEFAULT = Config()


@lru_cache(maxsize=8)
def config_for(extra: str) -> Config:
    """The screening of a hub whose ``screening_injection`` setting is ``extra``."""
    if not extra.strip():
        return DEFAULT
    try:
        return Config(screening.compile_injection(extra.splitlines()))
    except re.error as e:
        raise ValueError(f"screening_injection: not a regular expression: {e}") from e


def allows_txn(conn: Any, space_id: str, entry_ids: Sequence[str]) -> list[dict[str, Any]]:
    return [_row(r) for r in allows_of_txn(conn, space_id, entry_ids)]


def _row(r: Any) -> dict[str, Any]:
    return {"id": r.id, "entry": r.entry_id, "version": r.version, "rule": r.rule,
            "created_by": r.created_by, "created_at": r.created_at}


def check_txn(conn: Any, space_id: str, ops: Sequence[Any], config: Config = DEFAULT,
              provenance: dict[str, str] | None = None) -> None:
    """Refuse the batch when what it writes holds a finding no allow covers, or its
    provenance holds a secret (no allow covers those: the replica withholds such a field
    before signing, replica/engine/screened.py)."""
    findings = screening.screen_entries((op.entry for op in ops), injection=config.injection)
    in_provenance = screening.screen_provenance(provenance)
    if not findings and not in_provenance:
        return
    allows = allows_txn(conn, space_id, [f.entry for f in findings]) if findings else []
    left = [f for f in findings if not screening.allowed(f, allows)] + in_provenance
    if left:
        raise ContentScreened(screening.message(left), screening.details(left))


def parse_allow(body: dict[str, Any]) -> dict[str, str]:
    entry, version, rule = body.get("entry"), body.get("version"), body.get("rule", "*")
    if not (isinstance(entry, str) and is_entry_id(entry)):
        raise InvalidRequest("entry must be an entry id, e.g. page/deploy-notes",
                             {"field": "entry"})
    if not (isinstance(version, str) and _HEX64.match(version)):
        raise InvalidRequest("version must be the entry version (64 hex digits) the finding "
                             "was reported for", {"field": "version"})
    if not (isinstance(rule, str) and (rule == "*" or _RULE.match(rule) or _FP.match(rule))):
        raise InvalidRequest("rule must be a rule name, a finding fingerprint or *",
                             {"field": "rule"})
    return {"entry": entry, "version": version, "rule": rule}


def allow(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int,
          *, dry_run: bool = False) -> dict[str, Any]:
    """Allow one entry version's finding(s) (space admins); audited as
    ``screening.allow``. Allowing what is already allowed answers the existing allow.
    ``dry_run`` (the console's preview): every check runs, nothing is written."""
    direct(p)
    a = parse_allow(body)

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        prior = find_allow_txn(conn, space.id, a["entry"], a["version"], a["rule"])
        if prior is not None:
            return {"space": space.id, "allow": _row(prior), "created": False,
                    "dry_run": dry_run}
        if dry_run:
            return {"space": space.id, "created": False, "dry_run": True, "allow": dict(
                a, id=None, created_by=p.user_id, created_at=now)}
        row = {"id": new_id(now), "space_id": space.id, "entry_id": a["entry"],
               "version": a["version"], "rule": a["rule"], "created_by": p.user_id,
               "created_at": now}
        insert_allow_txn(conn, **row)
        audit.record_space_txn(conn, space, at=now, action="screening.allow",
                               actor=p.actor(), details=dict(a, id=row["id"]))
        return {"space": space.id, "created": True, "allow": {
            "id": row["id"], "entry": a["entry"], "version": a["version"], "rule": a["rule"],
            "created_by": p.user_id, "created_at": now}, "dry_run": False}

    return store.run_write(txn)


def list_allows(store: Store, p: Principal, space_ref: str, entry: str | None
                ) -> dict[str, Any]:
    """A space's allows (members: a replica checks its screened edits against them),
    newest first, ``entry`` narrows to one entry."""
    if entry is not None and not is_entry_id(entry):
        raise InvalidRequest("entry must be an entry id", {"field": "entry"})
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        rows = list_allows_txn(conn, space.id, entry, MAX_LISTED)
    return {"space": space.id, "allows": [_row(r) for r in rows]}
