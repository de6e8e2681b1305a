"""Roles and space rules: pure functions over values (no I/O), tested by tables. The hub
(``hub/policy.py``, the guard) and the replica (its local check before pushing) both call
this code, so the two never disagree on what a rule denies.

Roles per space, weakest first: viewer (pull) < editor (push) < admin (manage the space).
Hub owners act as admin in every space. Rules are deny rules evaluated on the actual ops of
a batch against the hub's current content, never on what the client claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

ROLES = ("viewer", "editor", "admin")
ACTIONS = ("create", "update", "delete")


def role_rank(role: str | None) -> int:
    return ROLES.index(role) if role in ROLES else -1


def at_least(role: str | None, minimum: str) -> bool:
    return role_rank(role) >= role_rank(minimum)


@dataclass(frozen=True)
class Rule:
    id: str
    effect: str
    who: str  # "viewer"|"editor"|"admin", a user id, or "agents"
    actions: tuple[str, ...]
    entries: str  # glob on entry ids, e.g. "guardrail/*"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rule:
        return cls(d["id"], d["effect"], d["who"], tuple(d["actions"]), d["entries"])


@dataclass(frozen=True)
class Actor:
    user_id: str
    role: str | None
    agent: str | None = None


def op_action(deleted: bool, current: tuple[str, bool] | None) -> str:
    """What an op does to the current content: create, update or delete."""
    if deleted:
        return "delete"
    if current is None or current[1]:
        return "create"
    return "update"


def rule_applies(rule: Rule, actor: Actor) -> bool:
    if rule.who == "agents":
        return actor.agent is not None
    if rule.who in ROLES:
        return actor.role == rule.who
    return rule.who == actor.user_id


def denied_ops(rules: list[Rule], actor: Actor,
               ops: list[tuple[str, str]]) -> list[dict[str, str]]:
    """Every ``(entry_id, action)`` a deny rule forbids, each with the rule that denies it."""
    return denied_by_applying([r for r in rules if rule_applies(r, actor)], ops)


def denied_by_applying(rules: list[Rule], ops: list[tuple[str, str]]) -> list[dict[str, str]]:
    """``denied_ops`` for rules already known to apply to the caller (the head sends a
    replica exactly those)."""
    out = []
    for entry_id, action in ops:
        for rule in rules:
            if (rule.effect == "deny" and action in rule.actions
                    and fnmatchcase(entry_id, rule.entries)):
                out.append({"id": entry_id, "action": action, "rule": rule.id})
                break
    return out
