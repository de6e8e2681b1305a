"""Roles and space rules for the hub: the pure evaluation lives in ``shared/policy.py`` (the
replica runs the same code for its local check before pushing); this module keeps the
hub's import path and adds what needs the hub's content: ``changes_txn`` reads the live
content of the guardrails a batch touches, so rules judge the real diff, and the guardrails
that hold a key a put takes (``key_takeovers``: an update of each holder).

    judge_txn (preparing)     changes + the ops that take a key (``claims``)
    takeover_reads / takeovers_of (committing, under the space lock): the claims judged
                              again on the holders read then (one may have landed since)
"""

from __future__ import annotations

import json
from typing import Any

from hub.admission import check_names_txn
from hub.store.guard_reads import (
    KEY_HOLDERS,
    guardrail_contents_txn,
    key_holders_of,
    key_holders_reads,
)
from hub.store.sql import Read, read_together
from shared.digest import sha256_hex
from shared.entry import Entry, make_entry
from shared.policy import (
    ACTIONS,
    BULK_DELETE,
    DEFAULT_RULES,
    EFFECTS,
    ROLES,
    RULE_ACTIONS,
    Actor,
    Change,
    Folders,
    Rule,
    at_least,
    bulk_deletes,
    change_of,
    denied_by_applying,
    denied_changes,
    denied_ops,
    effective_rules,
    guardrail_key,
    key_takeovers,
    needs_live_count,
    op_action,
    role_rank,
    rule_agent,
    rule_applies,
    taken_key,
)

__all__ = ["ACTIONS", "BULK_DELETE", "DEFAULT_RULES", "EFFECTS", "ROLES", "RULE_ACTIONS",
           "Actor", "Change", "Rule",
           "at_least", "bulk_deletes", "change_of", "changes_txn", "denied_by_applying", "denied_changes",
           "denied_ops", "effective_rules", "judge_txn", "key_digest", "key_digest_of",
           "needs_live_count", "op_action", "role_rank", "rule_agent", "rule_applies", "takeover_reads",
           "takeovers_of"]


def changes_txn(conn: Any, space_id: str, ops: Any,
                current: dict[str, tuple[str, bool]], folders: Folders = None) -> list[Change]:
    """What each op does to the space's current state (``judge_txn`` without the claims)."""
    return judge_txn(conn, space_id, ops, current, folders)[0]


def judge_txn(conn: Any, space_id: str, ops: Any, current: dict[str, tuple[str, bool]],
              folders: Folders = None) -> tuple[list[Change], tuple[int, ...]]:
    """What each op does to the space's current state, and the indexes of the ops that
    take a guardrail key (``claims``: the committing transaction judges them again). A
    create whose name is one file with a live entry's on macOS and Windows is refused
    first (hub/admission.py ``check_names_txn``, ``name_collision``). Only
    live guardrails' content is read (the typed rules compare it), whatever their path (a
    row with a key digest: the effective kind, shared/kinds.py, of what was written), and a
    key's holders only for an op that takes it; other kinds are judged on versions alone.
    ``folders``: the space's folder mapping (its row, read with the rules version)."""
    check_names_txn(conn, space_id, ops, current)  # a create whose name is taken (D139)
    live = [op.entry_id for op in ops
            if op.entry_id in current and not current[op.entry_id][1]]
    before = {eid: make_entry(json.loads(c))
              for eid, c in guardrail_contents_txn(conn, space_id, live).items()}
    out = []
    for op in ops:
        c = change_of(op.entry_id, op.entry, current.get(op.entry_id), before.get(op.entry_id),
                      folders)
        if c is not None:
            out.append(c)
    # the entry's own state decides whether it takes a key: with the bases checked again
    # at commit, the claims hold there too
    claims = tuple(i for i, op in enumerate(ops)
                   if taken_key(op.entry, before.get(op.entry_id), folders) is not None)
    if claims:
        reads = takeover_reads(space_id, ops, claims, folders)
        out += takeovers_of(ops, claims, read_together(conn, reads), folders)
    return out, claims


def key_digest(key: str) -> str:
    """What ``entries.key_digest`` holds for a guardrail key (SHA-256 hex: any length of
    key, one bounded index column)."""
    return sha256_hex(key.encode("utf-8"))


def key_digest_of(e: Entry, folders: Folders = None) -> str | None:
    """``entries.key_digest`` of a row holding ``e``: a live guardrail's key digest."""
    key = guardrail_key(e, folders)
    return None if key is None else key_digest(key)


def takeover_reads(space_id: str, ops: Any, claims: tuple[int, ...],
                   folders: Folders = None) -> list[Read]:
    """The reads of the holders of the keys the ``claims`` take: one indexed, bounded
    statement per key (hub/store/guard_reads.py), for ``read_together``."""
    keys = sorted({guardrail_key(ops[i].entry, folders) or "" for i in claims})
    return key_holders_reads(space_id, [key_digest(k) for k in keys])


def takeovers_of(ops: Any, claims: tuple[int, ...], results: list[list[Any]],
                 folders: Folders = None) -> list[Change]:
    """The claims judged as updates of their keys' holders, ``results``: the rows of
    ``takeover_reads(space_id, ops, claims)``, in order."""
    keys = sorted({guardrail_key(ops[i].entry, folders) or "" for i in claims})
    holders = dict(zip(keys, key_holders_of(results), strict=True))
    out: list[Change] = []
    for i in claims:
        op = ops[i]
        rows = holders[guardrail_key(op.entry, folders) or ""]
        found = {eid: make_entry(json.loads(c)) for eid, c in rows[:KEY_HOLDERS]}
        # ``before`` None: the claim was made on the entry's own state while preparing
        out += key_takeovers(op.entry, None, found, complete=len(rows) <= KEY_HOLDERS,
                             folders=folders)
    return out
