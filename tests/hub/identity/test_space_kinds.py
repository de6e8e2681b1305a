"""A space's folder mapping (hub/space_kinds.py, docs/decisions.md D152): an admin maps a
folder to a kind (``Team Rules`` -> ``guardrail``), the guard judges kinds under it, the head
serves it to replicas. The attacks, each refused with nothing changed:

- an editor (or a viewer) changes the mapping, to take the guardrail kind off a folder;
- an editor weakens a guardrail that is one only through the mapping: lowers it, rewrites
  it, declares ``kind: page`` in its front matter, deletes it, moves it out of the folder;
- an admin's remap that would make a live guardrail stop being one (or a live page become
  one without its key being recorded): refused ``kinds_in_use``; once the entry declares
  ``kind: guardrail`` itself, the remap passes and it stays judged as a guardrail.
"""

from __future__ import annotations

from typing import Any

from shared.kinds import effective_kind
from shared.policy import change_of
from tests.hub.identity.test_typed_paths_guard import DEFAULT, denied
from tests.kit.wire import WireTeam, delete, put


def kinds(t: WireTeam, who: Any, mapping: dict[str, str], **kw: Any) -> Any:
    return who.post(f"/v1/spaces/{t.space}/kinds", {"kinds": mapping, **kw})


def head(t: WireTeam) -> dict[str, Any]:
    r = t.viewer.get(f"/v1/spaces/{t.space}/head")
    assert r.status_code == 200, r.text
    return dict(r.json())


def rail(eid: str, sev: str, body: str = "no deploys on friday\n", base: str | None = None,
         **meta: Any) -> Any:
    return put(eid, body, base=base, title="freeze", meta={"severity": sev, **meta})


def test_only_an_admin_changes_the_mapping(team: WireTeam) -> None:
    t = team
    before, counts = head(t), t.counts()
    for who in (t.editor, t.viewer):
        r = kinds(t, who, {"guardrail": "page"})
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "forbidden"
    for bad in ({"Skills": "Skill"}, {"a//b": "skill"}, {"": "skill"}, ["Skills"],
                {f"f{i}": "skill" for i in range(65)}):
        r = kinds(t, t.owner, bad)  # type: ignore[arg-type]
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"]["code"] == "invalid_request", r.text
    assert head(t)["rules_version"] == before["rules_version"] and t.counts() == counts
    shown = t.viewer.get(f"/v1/spaces/{t.space}/kinds")  # every member reads it
    assert shown.status_code == 200 and shown.json()["kinds"] == {}


def test_a_guardrail_by_the_mapping_is_additive(team: WireTeam) -> None:
    t, eid = team, "Ops Rules/freeze"
    v0 = head(t)["rules_version"]
    r = kinds(t, t.owner, {"Ops Rules/": "guardrail", "Skills": "skill"})
    assert r.status_code == 200, r.text
    h = head(t)
    assert h["kinds"] == {"Ops Rules": "guardrail", "Skills": "skill"}
    assert h["rules_version"] == v0 + 1  # a rules change: batches prepared before retry
    warn = rail(eid, "warn")  # no kind: line; a guardrail by its folder
    assert t.editor.publish(t.space, [warn]).status_code == 201
    block = rail(eid, "block", base=warn.entry.version)
    assert t.editor.publish(t.space, [block]).status_code == 201  # raising: editors may
    cur, before = block.entry.version, t.counts()
    attacks = [
        [rail(eid, "info", base=cur)],
        [rail(eid, "block", "deploy whenever\n", base=cur)],
        [rail(eid, "block", base=cur, kind="page")],
        [delete(eid, cur)],
        [delete(eid, cur), put("Archive/freeze", "no deploys on friday\n", title="freeze")],
    ]
    for ops in attacks:
        assert denied(t.editor.publish(t.space, ops)) == [
            (eid, ops[0].entry.deleted and "delete" or "update", DEFAULT)], ops
    assert t.counts() == before
    # the same file name in an unmapped folder is a page: no typed rule
    assert t.editor.publish(t.space, [rail("Notes/freeze", "warn")]).status_code == 201
    relaxed = rail(eid, "info", "relaxed\n", base=cur)
    r = t.owner.publish(t.space, [relaxed])
    assert r.status_code == 201, r.text  # an admin may weaken it
    assert t.owner.publish(t.space, [delete(eid, relaxed.entry.version)]).status_code == 201
    assert kinds(t, t.owner, {}).status_code == 200  # the next test's mapping starts empty


def test_a_remap_never_takes_the_guardrail_kind_from_a_live_entry(team: WireTeam) -> None:
    t, eid = team, "Board/quorum"
    assert kinds(t, t.owner, {"Board": "guardrail"}).status_code == 200
    g = rail(eid, "block", "three members make a quorum\n")
    by_default = put("guardrail/quorum", "count them\n", meta={"severity": "warn"})
    assert t.editor.publish(t.space, [g, by_default]).status_code == 201
    h, counts = head(t), t.counts()
    for mapping, hit in (({}, eid), ({"Board": "skill"}, eid),
                         ({"Board": "guardrail", "guardrail": "page"}, "guardrail/quorum")):
        r = kinds(t, t.owner, mapping)
        assert r.status_code == 422, (mapping, r.text)
        err = r.json()["error"]
        assert err["details"]["reason"] == "kinds_in_use", r.text
        assert err["details"]["entries"] == [hit]
    # a live page under a folder mapped onto guardrail: refused too (it would become one
    # with no record of its key)
    assert t.editor.publish(t.space, [put("Drafts/idea", "maybe\n")]).status_code == 201
    counts = t.counts()
    r = kinds(t, t.owner, {"Board": "guardrail", "Drafts": "guardrail"})
    assert r.json()["error"]["details"]["entries"] == ["Drafts/idea"], r.text
    assert head(t)["kinds"] == {"Board": "guardrail"}
    assert head(t)["rules_version"] == h["rules_version"] and t.counts() == counts
    # the entry declares its kind itself (a kind: line equal to its kind changes nothing:
    # an editor may write it); then the folder may be remapped and it stays a guardrail
    own = rail(eid, "block", "three members make a quorum\n", base=g.entry.version,
               kind="guardrail")
    assert t.editor.publish(t.space, [own]).status_code == 201
    dry = kinds(t, t.owner, {}, dry_run=True)
    assert dry.status_code == 200 and dry.json()["dry_run"] is True, dry.text
    assert head(t)["kinds"] == {"Board": "guardrail"}
    assert kinds(t, t.owner, {}).json()["changed"] == ["Board"]
    assert head(t)["kinds"] == {}
    assert denied(t.editor.publish(t.space, [delete(eid, own.entry.version)])) == [
        (eid, "delete", DEFAULT)]
    events = t.owner.get("/v1/audit", params={"space": t.space}).text
    assert '"space.kinds"' in events


def test_the_one_function_takes_the_mapping() -> None:
    folders = {"Team Rules": "guardrail", "a/b": "skill"}
    assert effective_kind("Team Rules/x", None, folders) == "guardrail"
    assert effective_kind("a/b/c/d", None, folders) == "skill"
    assert effective_kind("a/c", None, folders) == "a"  # a first folder that is a kind word
    assert effective_kind("Team/x", None, folders) == "page"
    assert effective_kind("skill/x", None, folders) == "skill"  # the default still holds
    assert effective_kind("Team Rules/x", {"kind": "persona"}, folders) == "persona"
    # the replica's local check: the same judgement with the head's mapping
    from shared.entry import make_entry
    was = make_entry({"id": "Team Rules/x", "title": "x", "body": "b\n",
                      "meta": {"severity": "block"}})
    now = make_entry({"id": "Team Rules/x", "title": "x", "body": "c\n",
                      "meta": {"severity": "block"}})
    c = change_of(was.id, now, (was.version, False), was, folders)
    assert c is not None and c.weakens and c.kind == "guardrail"
    c = change_of(was.id, now, (was.version, False), was)
    assert c is not None and not c.weakens and c.kind == "page"
