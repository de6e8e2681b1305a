"""Roles and space rules for the hub: the pure evaluation lives in ``shared/policy.py`` (the
replica runs the same code for its local check before pushing); this module keeps the
hub's import path and adds what needs the hub's content: ``changes_txn`` reads the live
content of the guardrails a batch touches, so rules judge the real diff."""

from __future__ import annotations

import json
from typing import Any

from hub.store.batches import current_contents_txn
from shared.entry import make_entry
from shared.ids import split_entry_id
from shared.policy import (
    ACTIONS,
    DEFAULT_RULES,
    EFFECTS,
    ROLES,
    Actor,
    Change,
    Rule,
    at_least,
    change_of,
    denied_by_applying,
    denied_changes,
    denied_ops,
    effective_rules,
    op_action,
    role_rank,
    rule_applies,
)

__all__ = ["ACTIONS", "DEFAULT_RULES", "EFFECTS", "ROLES", "Actor", "Change", "Rule",
           "at_least", "change_of", "changes_txn", "denied_by_applying", "denied_changes",
           "denied_ops", "effective_rules", "op_action", "role_rank", "rule_applies"]


def changes_txn(conn: Any, space_id: str, ops: Any,
                current: dict[str, tuple[str, bool]]) -> list[Change]:
    """What each op does to the space's current state. Only live guardrails' content is
    read (the typed rules compare it); other kinds are judged on versions alone."""
    typed = [op.entry_id for op in ops if split_entry_id(op.entry_id)[0] == "guardrail"
             and op.entry_id in current and not current[op.entry_id][1]]
    before = {eid: make_entry(json.loads(c))
              for eid, c in current_contents_txn(conn, space_id, typed).items()}
    out = []
    for op in ops:
        c = change_of(op.entry_id, op.entry, current.get(op.entry_id), before.get(op.entry_id))
        if c is not None:
            out.append(c)
    return out
