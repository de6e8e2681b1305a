"""Typed memory rules at the guard (DESIGN §12): guardrails are additive by default and the
rules judge what a batch does to the hub's state, not what it declares. Each attack here
went through before the typed rules (an editor lowered, edited and deleted guardrails; a
delete then a create bypassed ``deny update``)."""

from __future__ import annotations

from typing import Any

from shared.dpop import make_proof
from tests.kit.wire import WireTeam, delete, put


def guard(sev: str, body: str = "never push to prod\n", base: str | None = None,
          entry: str = "guardrail/prod") -> Any:
    return put(entry, body, base=base, title="prod", meta={"severity": sev})


def denied(r: Any) -> list[tuple[str, str, str]]:
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "policy_denied", r.text
    return [(d["id"], d["action"], d["rule"]) for d in err["details"]["denied"]]


DEFAULT = "default:guardrails-additive"


def as_agent(t: WireTeam, m: Any, token: str, ops: list[Any]) -> Any:
    """Publish ``ops`` with a delegated token of ``m`` (the agent's credential)."""
    body = m.batch(t.space, ops)
    path = f"/v1/spaces/{t.space}/batches"
    return t.raw.post(path, json=body, headers={
        "Authorization": f"DPoP {token}",
        "DPoP": make_proof(m.key, "POST", t.url + path, access_token=token)})


def test_editor_cannot_weaken_a_guardrail_admin_can(team_db: WireTeam) -> None:
    t = team_db
    warn = guard("warn")
    assert t.editor.publish(t.space, [warn]).status_code == 201  # adding one: editors may
    block = guard("block", base=warn.entry.version)
    assert t.editor.publish(t.space, [block]).status_code == 201  # raising: editors may
    cur = block.entry.version
    before = t.counts()
    # lowering the severity, editing the text, deleting it: refused, nothing written
    r = t.editor.publish(t.space, [guard("warn", base=cur)])
    assert denied(r) == [("guardrail/prod", "update", DEFAULT)]
    assert "lowers its severity from block to warn" in r.json()["error"]["message"]
    assert denied(t.editor.publish(t.space, [guard("block", "push when sure\n", base=cur)])
                  ) == [("guardrail/prod", "update", DEFAULT)]
    assert denied(t.editor.publish(t.space, [delete("guardrail/prod", cur)])) == [
        ("guardrail/prod", "delete", DEFAULT)]
    assert t.counts() == before
    # a delegated agent of the owner is at most an editor: refused too
    d = t.delegate(t.owner, "write", agent="runner")
    assert denied(as_agent(t, t.owner, d["token"], [guard("info", base=cur)])) == [
        ("guardrail/prod", "update", DEFAULT)]
    # an admin may
    r = t.owner.publish(t.space, [guard("info", "relaxed\n", base=cur)])
    assert r.status_code == 201, r.text


def test_space_allow_rule_lets_editors_weaken(team_db: WireTeam) -> None:
    t = team_db
    warn = guard("warn")
    assert t.editor.publish(t.space, [warn]).status_code == 201
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "allow", "who": "editor", "actions": ["update", "delete"],
        "entries": "guardrail/*"})
    assert r.status_code == 201, r.text
    lowered = guard("info", base=warn.entry.version)
    assert t.editor.publish(t.space, [lowered]).status_code == 201
    assert t.editor.publish(t.space, [delete("guardrail/prod", lowered.entry.version)]
                            ).status_code == 201
    # the effective rules show the default and the space's allow
    listed = t.owner.get(f"/v1/spaces/{t.space}/rules").json()
    assert [(x["id"], x["effect"], x["source"]) for x in listed["effective"]] == [
        (DEFAULT, "deny", "default"), ("default:agents-no-bulk-delete", "deny", "default"),
        (r.json()["rule"]["id"], "allow", "space")]


def test_delete_then_create_is_an_update(team_db: WireTeam) -> None:
    """The bypass: ``deny update`` on a glob, then delete the entry in one batch and create
    it with new content in the next. The re-create is judged as the update it is."""
    t = team_db
    page = put("page/y", "v1\n")
    assert t.editor.publish(t.space, [page]).status_code == 201
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "who": "editor", "actions": ["update"], "entries": "page/*"})
    rule = r.json()["rule"]["id"]
    assert t.editor.publish(t.space, [delete("page/y", page.entry.version)]).status_code == 201
    assert denied(t.editor.publish(t.space, [put("page/y", "v2, rewritten\n")])) == [
        ("page/y", "update", rule)]
    # guardrails: deleting is refused by default; with deletes allowed but updates denied,
    # the delete passes and the re-create does not
    g = guard("block")
    assert t.editor.publish(t.space, [g]).status_code == 201
    t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "allow", "who": "editor", "actions": ["delete"], "entries": "guardrail/*"})
    assert t.editor.publish(t.space, [delete("guardrail/prod", g.entry.version)]
                            ).status_code == 201
    assert denied(t.editor.publish(t.space, [guard("info", "anything goes\n")])) == [
        ("guardrail/prod", "update", DEFAULT)]


def test_rules_judge_the_real_diff_not_the_declared_base(team: WireTeam) -> None:
    """A create declared with ``base: null`` over a tombstone is still an update."""
    t = team
    g = guard("warn", entry="guardrail/declared")
    assert t.editor.publish(t.space, [g]).status_code == 201
    assert t.owner.publish(t.space, [delete("guardrail/declared", g.entry.version)]
                           ).status_code == 201
    r = t.editor.publish(t.space, [guard("info", entry="guardrail/declared")])
    assert denied(r) == [("guardrail/declared", "update", DEFAULT)]
