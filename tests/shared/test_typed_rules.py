"""Typed memory rules as tables (shared/policy.py): guardrails are additive by default,
judged on what an op does to the hub's state; allow/deny with the most specific pattern
winning, a space rule over a default, deny over allow on ties."""

from __future__ import annotations

import pytest

from shared.entry import Entry, make_entry, tombstone
from shared.policy import (
    Actor,
    Rule,
    change_of,
    denied_changes,
    effective_rules,
)


def g(sev: str | None = "block", body: str = "never push to prod\n", **kw: object) -> Entry:
    meta = {"severity": sev} if sev else {}
    return make_entry({"id": "guardrail/prod", "title": "prod", "body": body, "meta": meta,
                       **kw})


LIVE = g()
CUR = (LIVE.version, False)
GONE = (tombstone("guardrail/prod").version, True)
EDITOR, ADMIN = Actor("u1", "editor"), Actor("u0", "admin")
AGENT = Actor("u1", "editor", agent="bot")


def judge(after: Entry, current: tuple[str, bool] | None, before: Entry | None,
          actor: Actor, space_rules: list[dict] | None = None) -> list[tuple[str, str]]:
    c = change_of(after.id, after, current, before)
    if c is None:
        return []
    return [(d["action"], d["rule"]) for d in
            denied_changes(effective_rules(space_rules or []), actor, [c])]


DEFAULT = "default:guardrails-additive"


@pytest.mark.parametrize("name,after,current,before,actor,denied", [
    ("editor creates", g(), None, None, EDITOR, []),
    ("editor raises warn->block", g("block"), (g("warn").version, False), g("warn"), EDITOR, []),
    ("editor raises none->info", g("info"), (g(None).version, False), g(None), EDITOR, []),
    ("editor lowers block->warn", g("warn"), CUR, LIVE, EDITOR, [("update", DEFAULT)]),
    ("editor drops the severity", g(None), CUR, LIVE, EDITOR, [("update", DEFAULT)]),
    ("editor edits the text", g(body="push when sure\n"), CUR, LIVE, EDITOR,
     [("update", DEFAULT)]),
    ("editor raises and edits", g("block", body="x\n"), (g("warn").version, False), g("warn"),
     EDITOR, [("update", DEFAULT)]),
    ("editor retitles", g(title="other"), CUR, LIVE, EDITOR, [("update", DEFAULT)]),
    ("editor deletes", tombstone("guardrail/prod"), CUR, LIVE, EDITOR, [("delete", DEFAULT)]),
    ("editor re-creates a deleted one", g(), GONE, None, EDITOR, [("update", DEFAULT)]),
    ("agent lowers (delegation is an editor)", g("info"), CUR, LIVE, AGENT,
     [("update", DEFAULT)]),
    ("admin lowers", g("info"), CUR, LIVE, ADMIN, []),
    ("admin deletes", tombstone("guardrail/prod"), CUR, LIVE, ADMIN, []),
    ("unchanged put is no change", g(), CUR, LIVE, EDITOR, []),
])
def test_guardrails_are_additive_by_default(name: str, after: Entry, current: tuple | None,
                                            before: Entry | None, actor: Actor,
                                            denied: list) -> None:
    assert judge(after, current, before, actor) == denied, name


ALLOW_EDITORS = {"id": "r-allow", "effect": "allow", "who": "editor",
                 "actions": ["update", "delete"], "entries": "guardrail/*"}
DENY_UPDATE = {"id": "r-deny", "effect": "deny", "who": "editor", "actions": ["update"],
               "entries": "guardrail/*"}


@pytest.mark.parametrize("name,rules,after,current,before,actor,denied", [
    ("a space allow relaxes the default", [ALLOW_EDITORS], g("info"), CUR, LIVE, EDITOR, []),
    ("allow for editors does not cover a user", [ALLOW_EDITORS], g("info"), CUR, LIVE,
     Actor("u1", "viewer"), []),  # viewers are refused by role, not by rules
    ("a less specific allow does not beat the default",
     [dict(ALLOW_EDITORS, entries="*")], g("info"), CUR, LIVE, EDITOR, [("update", DEFAULT)]),
    ("a more specific allow for one guardrail",
     [dict(ALLOW_EDITORS, entries="guardrail/prod")], g("info"), CUR, LIVE, EDITOR, []),
    ("deny update also refuses a raise", [DENY_UPDATE], g("block"),
     (g("warn").version, False), g("warn"), EDITOR, [("update", "r-deny")]),
    ("deny beats allow on the same pattern", [ALLOW_EDITORS, DENY_UPDATE], g("info"), CUR,
     LIVE, EDITOR, [("update", "r-deny")]),
    ("a more specific allow beats a deny",
     [DENY_UPDATE, dict(ALLOW_EDITORS, id="r-one", entries="guardrail/prod")], g("block"),
     (g("warn").version, False), g("warn"), EDITOR, []),
    ("deny for agents applies to agents only",
     [{"id": "r-ag", "effect": "deny", "who": "agents", "actions": ["create"],
       "entries": "skill/*"}],
     make_entry({"id": "skill/x", "title": "x"}), None, None, AGENT, [("create", "r-ag")]),
    ("... not to the member's own CLI",
     [{"id": "r-ag", "effect": "deny", "who": "agents", "actions": ["create"],
       "entries": "skill/*"}],
     make_entry({"id": "skill/x", "title": "x"}), None, None, EDITOR, []),
    ("deny update: re-creating a deleted page is an update", [dict(DENY_UPDATE, entries="page/*")],
     make_entry({"id": "page/y", "title": "new"}), ("v", True), None, EDITOR,
     [("update", "r-deny")]),
])
def test_allow_and_deny_most_specific_wins(name: str, rules: list, after: Entry,
                                           current: tuple | None, before: Entry | None,
                                           actor: Actor, denied: list) -> None:
    assert judge(after, current, before, actor, rules) == denied, name


def test_denial_says_why() -> None:
    c = change_of("guardrail/prod", g("warn"), CUR, LIVE)
    [d] = denied_changes(effective_rules([]), EDITOR, [c])
    assert "lowers its severity from block to warn" in d["reason"]
    assert d["rule"] == DEFAULT


def test_defaults_are_listed_with_the_space_rules() -> None:
    rules = effective_rules([DENY_UPDATE])
    assert rules[0].source == "default" and rules[0].when == "weakens"
    assert rules[-1] == Rule.from_dict(dict(DENY_UPDATE, source="space"))
