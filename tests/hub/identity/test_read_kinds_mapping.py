"""Read rules judge kinds under the space's folder mapping (shared/readscope.py, hub/scope.py;
docs/decisions.md D142, D152). The attack: an admin maps ``HR/`` to the kind ``hr`` and
denies viewers ``read`` of that kind; a viewer reads the pull (changes, snapshot), the
remote reads (entry, list, search) and the backlinks. Judged by the default layout
``HR/salary`` is a ``page`` and every one of those would show it.

And a mapping change is a scope change: the fingerprint a scoped copy was built under no
longer matches, so the replica takes a snapshot (the one the head's rules and mapping
give it, computed the same way on both sides); a remap's dry run previews it.
"""

from __future__ import annotations

import json
from typing import Any

from shared.readscope import scope_of_head
from tests.kit.wire import WireTeam, ndjson, put, redeem

SECRET = "HR/salary"


def _reads(t: WireTeam, who: Any) -> dict[str, str]:
    s = f"/v1/spaces/{t.space}"
    out = {}
    for name, path in (("changes", "/changes?after=0"), ("snapshot", "/snapshot"),
                       ("list", "/entries?prefix="), ("entry", f"/entry?id={SECRET}"),
                       ("search", "/search?q=zebra"), ("backlinks", "/backlinks?id=Notes/open")):
        r = who.get(s + path)
        assert r.status_code == (404 if name == "entry" else 200), (name, r.text)
        # a refusal names only the id the reader asked for
        out[name] = r.text.replace(SECRET, "<asked>") if name == "entry" else r.text
    return out


def test_a_read_rule_on_a_mapped_kind_hides_the_folder_on_every_read_path(team: WireTeam
                                                                         ) -> None:
    t = team
    r = t.editor.publish(t.space, [
        put(SECRET, "zebra pay bands\n", title="Salary", links=["Notes/open"]),
        put("Notes/open", "zebra open notes\n", title="Open")])
    assert r.status_code == 201, r.text
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "*",
        "kinds": ["hr"]})
    assert r.status_code in (200, 201), r.text
    # no mapping yet: HR/salary is a page, the rule does not reach it
    before = ndjson(t.viewer.get(f"/v1/spaces/{t.space}/snapshot").text)
    assert SECRET in [x["entry"]["id"] for x in before[1:-1]]
    fp_before = before[0]["scope"]

    # the remap's dry run says who would stop reading what
    r = t.owner.post(f"/v1/spaces/{t.space}/kinds", {"kinds": {"HR": "hr"}, "dry_run": True})
    assert r.status_code == 200, r.text
    impact = {x["user_id"]: x for x in r.json()["read_impact"] if x["agent"] is None}
    assert impact[t.viewer.user_id]["loses_sample"] == [SECRET]
    assert t.editor.user_id not in impact
    r = t.owner.post(f"/v1/spaces/{t.space}/kinds", {"kinds": {"HR": "hr"}})
    assert r.status_code == 200, r.text
    for path, text in _reads(t, t.viewer).items():
        assert SECRET not in text and "pay bands" not in text, f"{path} shows {SECRET}"
        if path in ("changes", "snapshot", "list", "search"):
            assert "Notes/open" in text, path
    # the editor, whom no rule narrows, still reads it
    assert SECRET in t.editor.get(f"/v1/spaces/{t.space}/entries?prefix=").text

    # the copy built before the mapping is sent to a snapshot; the replica computes the
    # fingerprint the hub serves from the head's rules and mapping
    r = t.viewer.get(f"/v1/spaces/{t.space}/changes?after=0&scope={fp_before}")
    assert r.status_code == 410 and r.json()["error"]["details"]["reason"] == "scope", r.text
    snap = ndjson(t.viewer.get(f"/v1/spaces/{t.space}/snapshot").text)
    head = t.viewer.head(t.space)
    assert scope_of_head(head["rules"], (), head["kinds"]).fingerprint == snap[0]["scope"]
    assert snap[0]["scope"] != fp_before

    # the mapping removed: the rule reaches nothing again
    assert t.owner.post(f"/v1/spaces/{t.space}/kinds", {"kinds": {}}).status_code == 200
    assert SECRET in t.viewer.get(f"/v1/spaces/{t.space}/entries?prefix=").text


def test_a_remap_committed_during_a_pull_binds_every_answer_started_after_it(
        team: WireTeam) -> None:
    """The mapping is read with the rules, in the answer's own transaction: a remap that
    commits while a pull is under way hides the folder from every answer begun after it,
    and the pull already under way finishes under the mapping it began with."""
    from hub import feed, reads, space_kinds
    from hub import scope as scopes
    from hub.access import Principal

    t = team
    space = t.owner.create_space("remap-race")
    viewer = redeem(t.client, t.owner.invite(space, "viewer"), "v2")
    assert t.owner.publish(space, [put("Board/minutes", "zebra board minutes\n"),
                                   put("Notes/open", "zebra open\n")]).status_code == 201
    assert t.owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "*",
        "kinds": ["board"]}).status_code in (200, 201)
    store = t.hub.store
    v = Principal(viewer.user_id, viewer.device_id, "v2", False)
    owner = Principal(t.owner.user_id, t.owner.device_id, "owner", True)
    after: dict[str, str] = {}

    def remap_then_read(space_id: str) -> None:
        scopes.HOOKS.read = None  # once: the reads below must not re-enter
        space_kinds.set_kinds(store, owner, space_id, {"kinds": {"Board": "board"}},
                              t.hub.now())
        after["changes"] = b"".join(feed.changes(store, v, space, None, 0, 100)).decode()
        after["snapshot"] = b"".join(feed.snapshot(store, v, space)).decode()
        after["search"] = json.dumps(reads.search(store, v, space, "zebra", 20))
        after["list"] = json.dumps(reads.list_entries(store, v, space, prefix="", after="",
                                                      limit=50))

    scopes.HOOKS.read = remap_then_read
    try:
        first = b"".join(feed.changes(store, v, space, None, 0, 100)).decode()
    finally:
        scopes.HOOKS.read = None
    assert set(after) == {"changes", "snapshot", "search", "list"}
    for path, text in after.items():
        assert "Board/minutes" not in text and "Notes/open" in text, path
    assert "Board/minutes" in first  # begun before the remap: under the old mapping
