"""The console's previews (hub/console/preview.py) by table: a role change's gains, losses
and rules, and the per-action verdicts of "what may this person or agent change", which must
be the guard's (shared/policy.py)."""

from __future__ import annotations

import pytest

from hub.console import preview
from shared.policy import DEFAULT_RULES

SPACE = [{"id": "r1", "effect": "deny", "who": "agents", "actions": ["create"],
          "entries": "skill/*", "source": "space"},
         {"id": "r2", "effect": "allow", "who": "u_ed", "actions": ["update", "delete"],
          "entries": "guardrail/team", "source": "space"}]
EFFECTIVE = [r.to_dict() for r in DEFAULT_RULES] + SPACE


def test_role_impact_says_what_is_gained_lost_and_which_rules_move() -> None:
    up = preview.role_impact(EFFECTIVE, "u_v", "viewer", "editor")
    assert up["gains"] == ["publish changes (within the rules)"] and up["loses"] == []
    assert [r for r in up["rules_start"] if "default:guardrails-additive" in r]
    down = preview.role_impact(EFFECTIVE, "u_a", "admin", "viewer")
    assert "publish changes (within the rules)" in down["loses"] and down["gains"] == []
    same = preview.role_impact(EFFECTIVE, "u_a", "editor", "editor")
    assert same == {"gains": [], "loses": [], "rules_start": [], "rules_stop": [],
                    "rules_after": same["rules_after"]}


@pytest.mark.parametrize(("user", "role", "agent", "entry", "want"), [
    ("u_ed", "editor", None, "skill/x", {"create": True, "update": True, "delete": True}),
    ("u_ed", "editor", "bot", "skill/x", {"create": False, "update": True, "delete": True}),
    ("u_v", "viewer", None, "page/x", {"create": False, "update": False, "delete": False}),
    ("u_o", "editor", None, "guardrail/x",
     {"create": True, "update": True, "update (weakening)": False, "delete": False}),
    # a space rule for this user beats the default on the exact id
    ("u_ed", "editor", None, "guardrail/team",
     {"create": True, "update": True, "update (weakening)": True, "delete": True}),
    ("u_a", "admin", None, "guardrail/x",
     {"create": True, "update": True, "update (weakening)": True, "delete": True}),
    # an admin's agent acts as an editor: the default rule stops it weakening a guardrail
    ("u_a", "admin", "bot", "guardrail/x",
     {"create": True, "update": True, "update (weakening)": False, "delete": False}),
])
def test_may_change(user: str, role: str, agent: str | None, entry: str,
                    want: dict[str, bool]) -> None:
    rows = preview.may_change(EFFECTIVE, user, role, agent, entry)
    assert {r["action"]: r["allowed"] for r in rows} == want
    assert all(r["reason"] for r in rows if not r["allowed"])
