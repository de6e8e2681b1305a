"""Roles and space rules for the hub: the pure evaluation lives in ``shared/policy.py`` (the
replica runs the same code for its local check before pushing); this module keeps the
hub's import path."""

from __future__ import annotations

from shared.policy import (
    ACTIONS,
    ROLES,
    Actor,
    Rule,
    at_least,
    denied_by_applying,
    denied_ops,
    op_action,
    role_rank,
    rule_applies,
)

__all__ = ["ACTIONS", "ROLES", "Actor", "Rule", "at_least", "denied_by_applying",
           "denied_ops", "op_action", "role_rank", "rule_applies"]
