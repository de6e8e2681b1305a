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
pass: the ids are not under ``guardrail/``.

Renames on the wire (docs/protocol.md "Renames", docs/decisions.md D144), last: a put
``from`` an id the same batch deletes; for versions, the chain and the state root that
delete and that put, judged by the guard as both (a guardrail renamed away is its delete);
the hub's history of the new name follows it into the old one's. Their attacks: a put that
names a ``from`` it does not delete (another page's past spliced onto it), one ``from``
claimed twice, a guardrail renamed out of its folder."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.wire import Op
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
    # of the old one weakens (the same with the put naming it `from`: below)
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


# ---------------------------------------------------------------- renames (D144)


def move(old: Op, to: str, **fields: Any) -> list[Op]:
    """The two ops of a rename of ``old`` (as published) to ``to``."""
    e = old.entry
    new = put(to, fields.pop("body", e.body), title=e.title,
              meta=fields.pop("meta", dict(e.meta)), **fields)
    return [delete(e.id, e.version), replace(new, moved_from=e.id)]


def history(t: WireTeam, eid: str) -> list[tuple[str, str | None, bool]]:
    r = t.editor.get(f"/v1/spaces/{t.space}/history?id={eid}")
    assert r.status_code == 200, r.text
    return [(v["id"], v.get("from"), v["deleted"]) for v in r.json()["versions"]]


def test_history_of_a_renamed_page_shows_both_names(team: WireTeam) -> None:
    t = team
    first = put("Notes/Release Plan", "v1\n")
    assert t.editor.publish(t.space, [first]).status_code == 201
    second = put("Notes/Release Plan", "v2\n", base=first.entry.version,
                 title="Notes/Release Plan")
    assert t.editor.publish(t.space, [second]).status_code == 201
    ops = move(second, "Archive/Release Plan 2026")
    r = t.editor.publish(t.space, ops)
    assert r.status_code == 201, r.text
    third = put("Archive/Release Plan 2026", "v3\n", base=ops[1].entry.version,
                title="Notes/Release Plan")
    assert t.editor.publish(t.space, [third]).status_code == 201
    assert history(t, "Archive/Release Plan 2026") == [
        ("Archive/Release Plan 2026", None, False),
        ("Archive/Release Plan 2026", "Notes/Release Plan", False),
        ("Notes/Release Plan", None, False), ("Notes/Release Plan", None, False)]
    # the old name keeps its own history, ending in the delete of the rename
    assert history(t, "Notes/Release Plan")[0] == ("Notes/Release Plan", None, True)
    # the batch names the rename too (what ``quire admin revert`` plans from)
    seq = t.editor.get(f"/v1/spaces/{t.space}/history?id=Archive/Release Plan 2026"
                       ).json()["versions"][1]["seq"]
    ops_doc = t.editor.get(f"/v1/spaces/{t.space}/batch?seq={seq}").json()["ops"]
    assert {o["id"]: o.get("from") for o in ops_doc} == {
        "Notes/Release Plan": None, "Archive/Release Plan 2026": "Notes/Release Plan"}


def test_a_rename_that_does_not_delete_its_source_is_refused(team: WireTeam) -> None:
    t = team
    a, b = put("page/rn-a", "a\n"), put("page/rn-b", "b\n")
    assert t.editor.publish(t.space, [a, b]).status_code == 201
    before = t.counts()
    # names a's past without deleting it: another page's history spliced onto a new one
    r = t.editor.publish(t.space, [replace(put("page/rn-c", "a\n"), moved_from="page/rn-a")])
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
    # one source renamed twice
    r = t.editor.publish(t.space, [delete("page/rn-a", a.entry.version),
                                   replace(put("page/rn-c", "a\n"), moved_from="page/rn-a"),
                                   replace(put("page/rn-d", "a\n"), moved_from="page/rn-a")])
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
    # from itself
    r = t.editor.publish(t.space, [replace(put("page/rn-b", "b2\n", base=b.entry.version),
                                           moved_from="page/rn-b")])
    assert r.status_code == 422, r.text
    assert t.counts() == before


def test_a_rename_onto_a_taken_name_is_refused_as_a_stale_create(team: WireTeam) -> None:
    t = team
    a, taken = put("page/src-x", "x\n"), put("page/taken-x", "someone's\n")
    assert t.editor.publish(t.space, [a, taken]).status_code == 201
    before = t.counts()
    r = t.editor.publish(t.space, move(a, "page/taken-x"))
    assert r.status_code == 409 and r.json()["error"]["code"] == "base_mismatch", r.text
    assert t.counts() == before


def test_a_rename_from_a_guardrail_out_of_its_folder_is_refused_as_its_delete(
        team: WireTeam) -> None:
    t = team
    g = put("guardrail/no-force", "never force-push\n", title="force",
            meta={"severity": "block"})
    assert t.editor.publish(t.space, [g]).status_code == 201
    before = t.counts()
    for to, meta in (("Archive/no-force", {"severity": "block"}),  # out of guardrail/: a page
                     ("Policies/no-force", {"kind": "guardrail", "severity": "block"})):
        r = t.editor.publish(t.space, move(g, to, meta=meta))
        assert r.status_code == 403, r.text
        denied = [(d["id"], d["action"], d["rule"]) for d in r.json()["error"]["details"]
                  ["denied"]]
        assert denied == [("guardrail/no-force", "delete", DEFAULT)], to
    assert t.counts() == before
    # a page renamed into guardrail/ is a guardrail added: editors may (additive)
    p = put("page/idea", "always review\n", meta={"severity": "warn"})
    assert t.editor.publish(t.space, [p]).status_code == 201
    assert t.editor.publish(t.space, move(p, "guardrail/idea")).status_code == 201
    # and an admin may move a guardrail
    assert t.owner.publish(t.space, move(g, "Policies/no-force",
                                         meta={"kind": "guardrail", "severity": "block"})
                           ).status_code == 201


def test_a_reader_who_may_not_read_the_old_name_is_not_told_it(team: WireTeam) -> None:
    """The attack: a viewer barred from ``Secret/*`` reads the history, the batch, the
    activity or the pull of a page renamed out of it, to learn the hidden page's name."""
    t = team
    old = put("Secret/Acquisition Target", "moved to the wiki\n", title="target")
    assert t.editor.publish(t.space, [old]).status_code == 201
    ops = move(old, "Wiki/Target")
    assert t.editor.publish(t.space, ops).status_code == 201
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "Secret/*"})
    assert r.status_code == 201, r.text
    try:
        v = t.viewer
        hist = v.get(f"/v1/spaces/{t.space}/history?id=Wiki/Target").json()["versions"]
        assert [(h["id"], h.get("from")) for h in hist] == [("Wiki/Target", None)]
        seq = hist[0]["seq"]
        head = v.get(f"/v1/spaces/{t.space}/head").json()
        answers = [v.get(f"/v1/spaces/{t.space}/batch?seq={seq}").text,
                   v.get(f"/v1/spaces/{t.space}/changes", params={
                       "epoch": head["epoch"], "after": seq - 1, "limit": 1}).text]
        for text in answers:
            assert "Wiki/Target" in text and "Secret" not in text, text
        # the editor (no rule) is told both names
        assert [h["id"] for h in t.editor.get(
            f"/v1/spaces/{t.space}/history?id=Wiki/Target").json()["versions"]] == [
            "Wiki/Target", "Secret/Acquisition Target"]
    finally:
        t.owner.post(f"/v1/spaces/{t.space}/rules/{r.json()['rule']['id']}/remove", {})
