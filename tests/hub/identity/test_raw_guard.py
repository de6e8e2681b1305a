"""A put's raw text and its fields (docs/decisions.md D132 part 3, D150): the guard judges
the structured fields, every vault writes ``raw``, so the two must be one thing. The hub
parses ``raw`` and refuses a batch whose fields are not what it parses to: a guardrail
whose fields say ``severity: block`` (nothing weakened, for the guard) and whose raw says
``severity: info`` (what every member's file would say) is refused, nothing written."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from shared import PROTOCOL_HEADER
from shared.entry import Entry, make_entry
from shared.wire import Op
from tests.kit.wire import WireTeam, delete, put

GUARDRAIL_RAW = ("\ufeff---\r\nseverity: block\r\ntitle: 'freeze'\r\nkind: guardrail\r\n"
                 "---\r\nno deploys on friday\r\n")


def raw_put(entry_id: str, raw: str, base: str | None = None) -> Op:
    return Op(make_entry({"id": entry_id, "raw": raw}), base)


def lying_put(entry_id: str, raw: str, fields: dict[str, Any], base: str | None) -> Op:
    """An op whose fields are not its raw's (built around ``make_entry``, as an attacker
    would sign it)."""
    return Op(Entry(id=entry_id, raw=raw, **fields), base)


def test_a_raw_put_is_stored_byte_for_byte_with_its_parsed_fields(team: WireTeam) -> None:
    t, eid = team, "Team Rules/freeze"
    op = raw_put(eid, GUARDRAIL_RAW)
    assert op.entry.meta == {"kind": "guardrail", "severity": "block"}
    assert op.entry.title == "freeze" and op.entry.body == "no deploys on friday\r\n"
    r = t.editor.publish(t.space, [op])
    assert r.status_code == 201, r.text
    got = t.editor.get(f"/v1/spaces/{t.space}/entry?id={eid}").json()
    assert got["entry"]["raw"] == GUARDRAIL_RAW
    assert got["version"] == op.entry.version  # the version covers raw
    assert make_entry(got["entry"]).version == got["version"]
    # a raw that parses to the same fields is another version: the bytes are content
    lf = raw_put(eid, GUARDRAIL_RAW.replace("\r\n", "\n"), base=op.entry.version)
    assert lf.entry.meta == op.entry.meta and lf.entry.version != op.entry.version
    # (its body's line ends changed: a change of a guardrail's text, an admin's to make)
    assert t.editor.publish(t.space, [lf]).json()["error"]["code"] == "policy_denied"
    assert t.owner.publish(t.space, [lf]).status_code == 201


def test_raw_that_weakens_a_guardrail_behind_strict_fields_is_refused(team: WireTeam) -> None:
    t, eid = team, "guardrail/freeze"
    g = put(eid, "no deploys on friday\n", title="freeze", meta={"severity": "block"})
    assert t.editor.publish(t.space, [g]).status_code == 201
    before = t.counts()
    weak = "---\ntitle: freeze\nseverity: info\n---\nno deploys on friday\n"
    attack = lying_put(eid, weak, {"title": "freeze", "body": "no deploys on friday\n",
                                   "meta": {"severity": "block"}}, g.entry.version)
    r = t.editor.publish(t.space, [attack])
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request"
    assert "not what its raw text parses to (meta)" in err["message"]
    # the body too: the guard would judge the old text, vaults would get the new one
    attack = lying_put(eid, "---\ntitle: freeze\nseverity: block\n---\ndeploy any day\n",
                       {"title": "freeze", "body": "no deploys on friday\n",
                        "meta": {"severity": "block"}}, g.entry.version)
    r = t.editor.publish(t.space, [attack])
    assert r.status_code == 422 and "(body)" in r.json()["error"]["message"], r.text
    assert t.counts() == before
    # told honestly (fields derived from raw), the same weakening is the guard's to refuse
    r = t.editor.publish(t.space, [raw_put(eid, weak, g.entry.version)])
    assert r.status_code == 403 and r.json()["error"]["code"] == "policy_denied", r.text
    assert t.counts() == before


def test_raw_with_quire_markers_or_not_utf8_text_is_refused() -> None:
    from shared.entry import EntryError

    with pytest.raises(EntryError, match="reserved"):
        make_entry({"id": "page/x", "raw": "---\nquire:\n  conflict: {}\n---\nx\n"})
    with pytest.raises(EntryError, match="surrogate"):
        make_entry({"id": "page/x", "raw": "---\ntitle: x\n# \udcff\n---\nx\n"})
    with pytest.raises(EntryError, match="raw, line 3"):
        make_entry({"id": "page/x", "raw": "---\ntitle: [x\n---\nx\n"})


def test_an_old_replica_is_refused_only_by_a_space_that_holds_raw(team: WireTeam) -> None:
    """A replica before protocol 2 sends no ``Quire-Protocol`` header and knows no ``raw``
    field: a space with such an entry refuses it ``upgrade_required`` (426) on publish,
    changes and snapshot, rather than letting it fail on the field; a space without any
    keeps serving it, and a current replica is served by both."""
    t = team
    space, plain = t.owner.create_space("raw-later"), t.owner.create_space("plain")
    http = t.owner.client

    def answers(space: str, headers: dict[str, str]) -> list[int]:
        batch = t.owner.batch(space, [put(f"page/{next(n)}", "x\n")])
        return [http.get(f"/v1/spaces/{space}/changes?after=0",
                                         headers=headers).status_code,
                http.get(f"/v1/spaces/{space}/snapshot",
                                         headers=headers).status_code,
                http.post(f"/v1/spaces/{space}/batches", json=batch,
                                          headers=headers).status_code]

    n = itertools.count()
    owner_old = {"Authorization": t.owner.auth["Authorization"]}  # no header: version 1
    assert answers(space, owner_old) == [200, 200, 201]  # no raw yet: 1 is enough
    assert t.owner.publish(space, [raw_put("Notes/crlf", "a\r\nb\r\n")]).status_code == 201
    assert answers(space, owner_old) == [426, 426, 426]
    r = http.get(f"/v1/spaces/{space}/changes?after=0", headers=owner_old)
    err = r.json()["error"]
    assert err["code"] == "upgrade_required" and err["details"] == {"protocol": 1,
                                                                    "required": 2}
    assert answers(space, t.owner.auth) == [200, 200, 201]
    assert answers(plain, owner_old) == [200, 200, 201]  # the other space is unchanged
    bad = dict(owner_old, **{PROTOCOL_HEADER: "two"})
    assert answers(space, bad)[0] == 422


def test_a_rename_also_refuses_replicas_that_cannot_read_it(team: WireTeam) -> None:
    """A rename's ``from`` is a field a replica before protocol 2 does not know (it would
    stop pulling the space): the space that accepts one refuses such replicas too."""
    t = team
    space = t.owner.create_space("renamed-later")
    old = {"Authorization": t.owner.auth["Authorization"]}  # no header: version 1
    first = put("page/before", "x\n")
    assert t.owner.publish(space, [first]).status_code == 201
    assert t.owner.client.get(f"/v1/spaces/{space}/changes?after=0",
                              headers=old).status_code == 200
    moved = Op(make_entry({**first.entry.to_dict(), "id": "page/after"}), None,
               moved_from="page/before")
    r = t.owner.publish(space, [delete("page/before", first.entry.version), moved])
    assert r.status_code == 201, r.text
    r = t.owner.client.get(f"/v1/spaces/{space}/changes?after=0", headers=old)
    assert r.status_code == 426 and r.json()["error"]["code"] == "upgrade_required"


def test_a_secret_only_in_raws_text_is_screened(team: WireTeam) -> None:
    """Every vault writes raw, so what only the text holds (a YAML comment, parsed into no
    field) is screened too, placed on the file's own line."""
    key = "AKIA" + "Z3MSJV4WW7BZYXQP"  # assembled: no literal key in the repository
    team.editor.replica(team.space)
    before = team.counts()
    r = team.editor.publish(team.space, [raw_put(
        "Notes/setup", f"---\r\ntitle: setup\r\n# aws: {key}\r\n---\r\nnothing here\r\n")])
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "content_screened"
    assert [f["line"] for f in err["details"]["findings"]] == [3]
    assert team.counts() == before


def test_a_guardrail_left_behind_by_its_raw_kind_line_is_still_judged(team: WireTeam) -> None:
    """The typed rules read the fields raw parses to: a raw that drops ``kind: guardrail``
    (or turns it into a page) from a guardrail kept by front matter, keeping its text, is a
    change of a guardrail (refused for an editor), not an edit of a page."""
    t, eid = team, "Raw Rules/no-force-push"
    text = "---\r\nkind: guardrail\r\nseverity: block\r\ntitle: no force push\r\n---\r\nnever\r\n"
    g = raw_put(eid, text)
    assert t.editor.publish(t.space, [g]).status_code == 201
    before = t.counts()
    for weaker in (text.replace("kind: guardrail\r\n", ""),
                   text.replace("kind: guardrail", "kind: page"),
                   text.replace("severity: block", "severity: info")):
        r = t.editor.publish(t.space, [raw_put(eid, weaker, g.entry.version)])
        assert r.status_code == 403 and r.json()["error"]["code"] == "policy_denied", weaker
    assert t.counts() == before
