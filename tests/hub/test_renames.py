"""Renames on the wire (docs/protocol.md "Renames", docs/decisions.md D144): a put ``from``
an id that the same batch deletes. For versions, the chain and the state root a rename is
that delete and that put; the guard judges both (so moving a guardrail out of its folder,
or onto a page, is the delete of a guardrail: refused to an editor); the hub's history of
the new name follows it back into the old one's.

The attacks: a put that names a ``from`` it does not delete (history would splice another
page's past onto it), one ``from`` claimed twice, and a guardrail renamed away."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from shared.wire import Op
from tests.kit.wire import WireTeam, delete, make_wire_team, put

DEFAULT = "default:guardrails-additive"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)


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


def test_renaming_a_guardrail_away_is_refused_as_its_delete(team: WireTeam) -> None:
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
