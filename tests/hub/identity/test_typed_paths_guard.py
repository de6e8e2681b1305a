"""Typed rules through the paths of a real team folder (docs/decisions.md D132, D139): the
guard judges an entry's *effective* kind (``shared/kinds.py``: front matter ``kind:``, else
the first folder), of the version it replaces and of the one it writes. Each attack below is
a way to weaken a guardrail without touching a ``guardrail/<slug>`` id:

- a guardrail under a renamed folder (``Policies/…`` with ``kind: guardrail``) edited,
  lowered or deleted by an editor;
- a ``kind:`` change in front matter (guardrail -> page, or removing the line) to leave
  the typed rules behind, then weaken the page at leisure;
- a rename (the delete of the guardrail and the create of a page, in one batch or two).

Each is refused with ``policy_denied`` by the default rule, nothing written; an admin may.
Without the effective kind (``change_of`` judging ``split_entry_id(id)[0]``) each would
pass: the ids are not under ``guardrail/``."""

from __future__ import annotations

from typing import Any

from tests.kit.wire import WireTeam, delete, put

DEFAULT = "default:guardrails-additive"


def rail(entry: str, sev: str = "warn", body: str = "never force-push main\n",
         base: str | None = None, **meta: Any) -> Any:
    m = {"kind": "guardrail", "severity": sev}
    m.update(meta)
    return put(entry, body, base=base, title="no force push",
               meta={k: v for k, v in m.items() if v is not None})


def denied(r: Any) -> list[tuple[str, str, str]]:
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "policy_denied", r.text
    return [(d["id"], d["action"], d["rule"]) for d in err["details"]["denied"]]


def test_a_guardrail_under_a_renamed_folder_is_still_additive(team: WireTeam) -> None:
    t, eid = team, "Policies/No Force Push"
    warn = rail(eid)
    r = t.editor.publish(t.space, [warn])
    assert r.status_code == 201, r.text  # adding one: editors may
    block = rail(eid, "block", base=warn.entry.version)
    assert t.editor.publish(t.space, [block]).status_code == 201  # raising: editors may
    cur = block.entry.version
    before = t.counts()
    r = t.editor.publish(t.space, [rail(eid, "info", base=cur)])
    assert denied(r) == [(eid, "update", DEFAULT)]
    assert "lowers its severity from block to info" in r.json()["error"]["message"]
    assert denied(t.editor.publish(t.space, [rail(eid, "block", "force-push if sure\n",
                                                  base=cur)])) == [(eid, "update", DEFAULT)]
    assert denied(t.editor.publish(t.space, [delete(eid, cur)])) == [(eid, "delete", DEFAULT)]
    assert t.counts() == before
    r = t.owner.publish(t.space, [rail(eid, "info", "relaxed\n", base=cur)])
    assert r.status_code == 201, r.text  # an admin may weaken it


def test_changing_kind_in_front_matter_does_not_escape_the_typed_rules(team: WireTeam) -> None:
    t = team
    # by folder (today's layout): kind: page on top of it, with a weaker text
    by_folder = put("guardrail/deploy-freeze", "no deploys on friday\n", title="freeze",
                    meta={"severity": "block"})
    assert t.editor.publish(t.space, [by_folder]).status_code == 201
    cur = by_folder.entry.version
    before = t.counts()
    for meta in ({"kind": "page", "severity": "block"}, {"kind": "page"},
                 {"kind": "skill", "severity": "block"}):
        escaped = put("guardrail/deploy-freeze", "deploy whenever\n", base=cur,
                      title="freeze", meta=meta)
        assert denied(t.editor.publish(t.space, [escaped])) == [
            ("guardrail/deploy-freeze", "update", DEFAULT)], meta
    # by front matter: the kind line removed, or changed, the text kept as it was
    eid = "Team Rules/freeze"
    r = rail(eid, "block", "no deploys on friday\n")
    assert t.editor.publish(t.space, [r]).status_code == 201
    for meta in ({"severity": "block"}, {"kind": "page", "severity": "block"},
                 {"kind": "persona", "severity": "block"}):
        plain = put(eid, "no deploys on friday\n", base=r.entry.version,
                    title="no force push", meta=meta)
        assert denied(t.editor.publish(t.space, [plain])) == [(eid, "update", DEFAULT)], meta
    assert t.counts()["entries"] == before["entries"] + 1


def test_renaming_a_guardrail_is_refused_as_its_delete(team: WireTeam) -> None:
    t = team
    old = put("guardrail/no-secrets", "never commit secrets\n", title="secrets",
              meta={"severity": "block"})
    moved = rail("Policies/no-secrets", "block", "never commit secrets\n")
    assert t.editor.publish(t.space, [old]).status_code == 201
    # out of guardrail/ into a folder, kept a guardrail by its front matter: the delete
    # of the old one weakens (a move keeps no history yet, D132 part 4)
    r = t.editor.publish(t.space, [delete("guardrail/no-secrets", old.entry.version), moved])
    assert denied(r) == [("guardrail/no-secrets", "delete", DEFAULT)]
    # a guardrail kept by front matter, renamed to a page in another folder
    eid = "Policies/branches"
    g = rail(eid, "warn", "protect main\n")
    assert t.editor.publish(t.space, [g]).status_code == 201
    as_page = put("Archive/branches", "protect main (old)\n", title="branches")
    r = t.editor.publish(t.space, [delete(eid, g.entry.version), as_page])
    assert denied(r) == [(eid, "delete", DEFAULT)]
    # two batches: the create of the page first (allowed: a page), then the delete: refused
    assert t.editor.publish(t.space, [as_page]).status_code == 201
    assert denied(t.editor.publish(t.space, [delete(eid, g.entry.version)])) == [
        (eid, "delete", DEFAULT)]
    # the admin may move it
    assert t.owner.publish(t.space, [delete(eid, g.entry.version)]).status_code == 201


def test_a_space_rule_on_guardrail_glob_covers_guardrails_in_any_folder(
        team: WireTeam) -> None:
    """A rule written for ``guardrail/*`` means "guardrails": it is matched against the
    kind-qualified name (``guardrail/<id>``) of a guardrail whose file is elsewhere."""
    t = team
    agent_rule = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "deny", "who": "editor", "actions": ["create"],
        "entries": "guardrail/locked/*"})
    assert agent_rule.status_code == 201, agent_rule.text
    r = t.editor.publish(t.space, [rail("locked/x", "block")])
    assert denied(r) == [("locked/x", "create", agent_rule.json()["rule"]["id"])]
    # a page in that folder is not a guardrail: the rule does not reach it
    assert t.editor.publish(t.space, [put("locked/y", "a page\n")]).status_code == 201
    rid = agent_rule.json()["rule"]["id"]
    r = t.owner.post(f"/v1/spaces/{t.space}/rules/{rid}/remove", {})
    assert r.status_code == 200, r.text


def test_a_space_rule_may_name_a_folder_as_people_name_it(team: WireTeam) -> None:
    """Rules' globs take what ids are (any path): a rule on ``Board Minutes/*`` was refused
    (``invalid_request``: lowercase ASCII only), so such a folder could not be protected."""
    t = team
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "deny", "who": "editor", "actions": ["create", "update"],
        "entries": "Board Minutes/*"})
    assert r.status_code == 201, r.text
    rid = r.json()["rule"]["id"]
    try:
        assert denied(t.editor.publish(t.space, [put("Board Minutes/2026-12", "x\n")])) == [
            ("Board Minutes/2026-12", "create", rid)]
        assert t.editor.publish(t.space, [put("Minutes/2026-12", "x\n")]).status_code == 201
    finally:
        t.owner.post(f"/v1/spaces/{t.space}/rules/{rid}/remove", {})
    bad = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "deny", "who": "editor", "actions": ["create"], "entries": "a\x07b"})
    assert bad.status_code == 422, bad.text
