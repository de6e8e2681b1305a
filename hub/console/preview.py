"""What a change of role would allow or deny, and what a person or agent may change: pure
functions over the effective rules ``admin.list_rules`` answers (the built-in defaults and
the space's rules) and the evaluation the guard itself runs (``shared/policy.py``), so the
console's preview and the guard's verdict cannot disagree.

    role_impact(effective, user, before, after)  ->  what the member gains and loses
    may_change(effective, user, role, agent, id)  ->  per action: allowed, or the deciding
                                                      rule and the guard's reason
    what_may_change(...)                          ->  that, the role acted as, the rules
    read_impact_lines(read_impact)                ->  a read rule's preview, one line per
                                                      member (or agent) whose reading changes
"""

from __future__ import annotations

import re
from typing import Any

from shared import policy
from shared.ids import is_id
from shared.kinds import folder_kind

CAN = {
    "viewer": ["read, search and pull the space"],
    "editor": ["publish changes (within the rules)"],
    "admin": ["manage members, invites, rules, replicas, agents and epochs; read the audit",
              "weaken guardrails (the default rule stops editors)"],
}


def capabilities(role: str | None) -> list[str]:
    """What a role may do, weakest first (each role has its own and the weaker roles')."""
    out: list[str] = []
    for r in policy.ROLES[: policy.role_rank(role) + 1]:
        out += CAN[r]
    return out


def _rules(effective: list[dict[str, Any]]) -> list[policy.Rule]:
    return [policy.Rule.from_dict(r) for r in effective]


# the guard's reasons name a space rule by its id; people read "a space rule"
_SPACE_RULE = re.compile(r"\(rule [0-9a-hjkmnp-tv-z]{26}\)")


def _describe(r: policy.Rule) -> str:
    when = " when it weakens a guardrail" if r.when else ""
    source = "a space rule" if is_id(r.id) else r.id  # defaults are named, space rules not
    return f"{r.effect} {', '.join(r.actions)} on {r.entries}{when} ({source})"


def applying(effective: list[dict[str, Any]], actor: policy.Actor) -> list[str]:
    """The effective rules that apply to ``actor``, described."""
    return [_describe(r) for r in _rules(effective) if policy.rule_applies(r, actor)]


def role_impact(effective: list[dict[str, Any]], user_id: str, before: str, after: str
                ) -> dict[str, list[str]]:
    """What changing ``user_id`` from ``before`` to ``after`` allows and denies them."""
    was, will = capabilities(before), capabilities(after)
    old = applying(effective, policy.Actor(user_id, before))
    new = applying(effective, policy.Actor(user_id, after))
    return {"gains": [c for c in will if c not in was],
            "loses": [c for c in was if c not in will],
            "rules_start": [r for r in new if r not in old],
            "rules_stop": [r for r in old if r not in new],
            "rules_after": new}


def agent_role(role: str | None) -> str | None:
    """A delegated agent acts as at most an editor (``hub/access.py``), with a write grant."""
    return "editor" if role == "admin" else role


def may_change(effective: list[dict[str, Any]], user_id: str, role: str | None,
               agent: str | None, entry_id: str, kind: str | None = None
               ) -> list[dict[str, Any]]:
    """For each action on ``entry_id``: whether the guard lets this member (or their agent,
    under a write delegation) do it, with the deciding rule and reason when it does not.
    Guardrails get a row for a weakening update too (lowering severity, changing text), and
    their deletion is judged as the weakening it is."""
    actual = agent_role(role) if agent else role
    actor = policy.Actor(user_id, actual, agent)
    # the entry's effective kind (shared/kinds.py: front matter first, D139), else the one
    # its path gives a new entry; rules match it as ``<kind>/<id>`` too
    k = kind or folder_kind(entry_id)
    changes = [policy.Change(entry_id, a, kind=k) for a in policy.ACTIONS]
    if k == "guardrail":
        # as the guard judges guardrails (shared/policy.py change_of): an update may raise
        # the severity (additive) or weaken it; deleting one always weakens it
        changes = [policy.Change(entry_id, "create", kind=k),
                   policy.Change(entry_id, "update", kind=k),
                   policy.Change(entry_id, "update", True, "weakens it", kind=k),
                   policy.Change(entry_id, "delete", True, "deletes the guardrail", kind=k)]
    rows = []
    for c in changes:
        label = c.action + (" (weakening)" if c.weakens and c.action == "update" else "")
        if not policy.at_least(actual, "editor"):
            rows.append({"action": label, "allowed": False, "rule": "role",
                         "reason": f"a {actual or 'non-member'} may not publish at all"})
            continue
        denied = policy.denied_changes(_rules(effective), actor, [c])
        rows.append({"action": label, "allowed": not denied,
                     "rule": denied[0]["rule"] if denied else "",
                     "reason": _SPACE_RULE.sub("(a space rule)", denied[0]["reason"])
                     if denied else ""})
    return rows


def what_may_change(effective: list[dict[str, Any]], user_id: str, role: str | None,
                    agent: str | None, entry_id: str, kind: str | None = None
                    ) -> dict[str, Any]:
    """The rules page's answer: the role acted as, the verdict per action, and the
    effective rules that apply to the member (or their agent)."""
    acting = agent_role(role) if agent else role
    return {"role": role, "agent": agent, "entry": entry_id, "acting_as": acting,
            "rows": may_change(effective, user_id, role, agent, entry_id, kind),
            "applying": applying(effective, policy.Actor(user_id, acting, agent))}


def _some(ids: list[str], n: int) -> str:
    more = n - len(ids)
    return ", ".join(ids) + (f" and {more} more" if more > 0 else "")


def read_impact_lines(impact: list[dict[str, Any]]) -> list[str]:
    """``read_impact`` (hub/scope.py ``read_impact_txn``: a read rule's dry run) as the
    preview says it: per member, or agent under a member, how many live entries they would
    stop and start reading, with examples; one line saying nobody when no one changes."""
    out = []
    for row in impact:
        who = row["name"]
        if row["agent"] == "*":
            who += "'s agents (any a rule does not name)"
        elif row["agent"]:
            who += f" through agent {row['agent']}"
        parts = []
        if row["loses"]:
            parts.append(f"stops reading {row['loses']} entries: "
                         + _some(row["loses_sample"], row["loses"]))
        if row["gains"]:
            parts.append(f"starts reading {row['gains']} entries: "
                         + _some(row["gains_sample"], row["gains"]))
        out.append(f"{who} ({row['role']}) " + "; ".join(parts))
    return out or ["Nobody: no member or agent would read anything more or less."]


def read_impact_section(dry_run: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """A rule change's dry run as the preview page's list: ``read_impact_lines`` under a
    heading for a read rule, nothing for a write rule (its dry run has no read_impact)."""
    if "read_impact" not in dry_run:
        return []
    return [("Who would read differently", read_impact_lines(dry_run["read_impact"]))]
