"""Role and deny-rule evaluation as tables (hub/policy.py is pure)."""

from __future__ import annotations

import pytest

from hub.audit import event_digest, verify_events
from hub.guard import check_bases
from hub.policy import Actor, Rule, at_least, denied_ops, op_action
from shared.errors import BaseMismatch
from tests.kit.wire import delete, put

GUARD = Rule("r1", "deny", "editor", ("create", "update", "delete"), "guardrail/*")
AGENTS = Rule("r2", "deny", "agents", ("delete",), "*")
USER = Rule("r3", "deny", "u1", ("update",), "page/secret*")


@pytest.mark.parametrize("role,minimum,ok", [
    ("viewer", "viewer", True), ("viewer", "editor", False), ("editor", "editor", True),
    ("admin", "editor", True), ("editor", "admin", False), (None, "viewer", False),
])
def test_role_order(role: str | None, minimum: str, ok: bool) -> None:
    assert at_least(role, minimum) is ok


@pytest.mark.parametrize("actor,ops,denied", [
    (Actor("u2", "editor"), [("guardrail/x", "update"), ("page/a", "create")],
     [("guardrail/x", "update", "r1")]),
    (Actor("u2", "admin"), [("guardrail/x", "update")], []),
    (Actor("u2", "editor", agent="bot"), [("page/a", "delete"), ("guardrail/y", "create")],
     [("page/a", "delete", "r2"), ("guardrail/y", "create", "r1")]),
    (Actor("u1", "admin"), [("page/secret-plan", "update"), ("page/secret-plan2", "create")],
     [("page/secret-plan", "update", "r3")]),
    (Actor("u2", "viewer"), [("guardrail/x", "update")], []),
])
def test_deny_rules_list_every_denied_op(actor: Actor, ops: list, denied: list) -> None:
    got = denied_ops([GUARD, AGENTS, USER], actor, ops)
    assert [(d["id"], d["action"], d["rule"]) for d in got] == denied


@pytest.mark.parametrize("deleted,current,action", [
    # a put over a tombstone re-creates the entry: an update (closes delete-then-create)
    (False, None, "create"), (False, ("v", True), "update"), (False, ("v", False), "update"),
    (True, ("v", False), "delete"),
])
def test_op_action_is_judged_on_current_content(deleted: bool, current: tuple | None,
                                                action: str) -> None:
    assert op_action(deleted, current) == action


def test_bases_are_checked_against_current_versions() -> None:
    from types import SimpleNamespace

    v = put("page/a", "x").entry.version
    ok = SimpleNamespace(ops=(put("page/a", "y", base=v), put("page/new")))
    check_bases(ok, {"page/a": (v, False)})
    for ops, current in [
        ((put("page/a", "y", base=None),), {"page/a": (v, False)}),  # create over live
        ((put("page/a", "y", base="f" * 64),), {"page/a": (v, False)}),
        ((delete("page/a", v),), {"page/a": (v, True)}),  # delete what is gone
        ((put("page/a", "y", base=v),), {}),
    ]:
        with pytest.raises(BaseMismatch):
            check_bases(SimpleNamespace(ops=ops), current)
    check_bases(SimpleNamespace(ops=(put("page/a", "y"),)), {"page/a": (v, True)})


def test_audit_chain_names_the_altered_event() -> None:
    events, prev = [], "0" * 64
    for n in range(1, 5):
        ev = {"chain": "s", "n": n, "at": n, "action": "publish", "actor": {"user": "u"},
              "details": {"seq": n}, "prev": prev}
        ev["digest"] = event_digest(**{k: ev[k] for k in ("chain", "n", "at", "action",
                                                          "actor", "details", "prev")})
        prev = ev["digest"]
        events.append(ev)
    assert verify_events(events) == (True, None)
    events[2] = dict(events[2], details={"seq": 99})
    ok, bad = verify_events(events)
    assert not ok and bad["n"] == 3
