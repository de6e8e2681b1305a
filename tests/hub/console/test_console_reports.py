"""Conflict reports and screening allows in the console, on the real hub app (in-process):
a replica's report is listed for every member with who and which device reported it; a
report for a replica that is not the caller's is refused and changes nothing; bad reports
are refused with a clear code; a viewer sees both pages but no allow form, an editor's
allow POST is refused, and an admin's allow is previewed (nothing written) then made.

The real CLI's path (two replicas make a conflict, the report appears, then disappears
once resolved) is tests/hub/console/test_console_reports_e2e.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.console.test_console_inproc import _csrf, _origin, members, sign_in
from tests.kit.wire import ndjson, redeem

PAGE = "/console/spaces/team/conflicts"
ITEM = {"id": "pk-0123456789abcdef0123", "entry": "page/deploy", "kind": "edit",
        "since": 1_764_590_000_000, "claimed": False}


@pytest.fixture
def team(hub_app: dict[str, Any]) -> dict[str, Any]:
    return members(hub_app)


def report(m: Any, space: str, replica: str, body: Any) -> Any:
    return m.client.put(f"/v1/spaces/{space}/replicas/{replica}/conflicts", json=body,
                        headers=m.auth)


def _rows(team: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The stored reports, read straight from the table (what "changes nothing" means)."""
    from sqlalchemy import select

    from hub.store.schema import conflict_reports as t

    with team["store"].read() as conn:
        return [tuple(r) for r in conn.execute(select(t).order_by(t.c.replica_id,
                                                                   t.c.entry_id)).all()]


def test_a_report_is_listed_replaced_and_guarded(hub_app: dict[str, Any],
                                                 team: dict[str, Any]) -> None:
    team["store"] = hub_app["hub"].store
    s, ed, viewer = team["space"], team["ed"], team["viewer"]
    rep = ed.replica(s)
    r = report(ed, s, rep, {"conflicts": [ITEM, dict(ITEM, entry="skill/../x", kind=
                                                     "edit_delete", claimed=True)]})
    assert r.status_code == 422  # not an entry id: the whole report is refused
    r = report(ed, s, rep, {"conflicts": [ITEM, dict(ITEM, entry="skill/lint",
                                                     kind="edit_delete", claimed=True)]})
    assert r.status_code == 200 and r.json()["conflicts"] == 2, r.text

    b = sign_in(hub_app, viewer)  # every member sees the page
    html = b.get(PAGE).text
    assert "page/deploy" in html and "skill/lint" in html and "edit_delete" in html
    assert "editor-laptop" in html and "2 reported, on 2 entries" in html
    before = _rows(team)

    # another member's device PUTs a report for the editor's replica: refused, nothing
    # changes (without check_replica_txn in put_report this replaced the editor's report)
    for attacker in (team["viewer"], team["owner"]):
        r = report(attacker, s, rep, {"conflicts": []})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
        assert r.json()["error"]["details"]["reason"] == "unknown_replica"
    assert _rows(team) == before
    # a non-member: the space is not_found
    other = redeem(hub_app["client"], team["owner"].invite(
        team["owner"].create_space("other"), "editor"), "stranger")
    r = report(other, s, rep, {"conflicts": []})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert _rows(team) == before

    # bad reports: a clear code each, nothing changed
    too_many = [dict(ITEM, entry=f"page/p{i}") for i in range(501)]
    for body, code in (({"conflicts": too_many}, "too_large"),
                       ({"conflicts": [dict(ITEM, content="secret")]}, "invalid_request"),
                       ({"conflicts": [dict(ITEM, kind="weird")]}, "invalid_request"),
                       ({"conflicts": [ITEM, ITEM]}, "invalid_request"),
                       ({"conflicts": [dict(ITEM, since=True)]}, "invalid_request"),
                       ({"conflicts": "all"}, "invalid_request"),
                       ({"conflicts": [], "extra": 1}, "invalid_request")):
        r = report(ed, s, rep, body)
        assert r.json()["error"]["code"] == code, (body if len(str(body)) < 200 else code,
                                                   r.text)
        assert _rows(team) == before
    r = ed.client.put(f"/v1/spaces/{s}/replicas/{rep}/conflicts", headers=ed.auth,
                      content=b'{"conflicts": [' + b"1," * 70_000 + b"1]}")
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    assert _rows(team) == before
    assert report(ed, s, rep, {"conflicts": too_many[:500]}).status_code == 200

    # a report replaces the previous one; an empty one clears the page
    assert report(ed, s, rep, {"conflicts": [ITEM]}).status_code == 200
    html = b.get(PAGE).text
    assert "page/deploy" in html and "skill/lint" not in html
    assert report(ed, s, rep, {"conflicts": []}).status_code == 200
    assert "No open conflicts reported" in b.get(PAGE).text

    # a revoked replica: its report is no longer listed, and it cannot report again
    assert report(ed, s, rep, {"conflicts": [ITEM]}).status_code == 200
    r = team["owner"].post(f"/v1/spaces/{s}/replicas/{rep}/revoke", {})
    assert r.status_code == 200, r.text
    assert "page/deploy" not in b.get(PAGE).text
    r = report(ed, s, rep, {"conflicts": []})
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == \
        "replica_revoked"


ALLOW = "/console/admin/spaces/team/screening/allow"
VERSION = "ab" * 32


def _allows(team: dict[str, Any]) -> list[dict[str, Any]]:
    return team["owner"].get(f"/v1/spaces/{team['space']}/screening/allows").json()["allows"]


def _audit(team: dict[str, Any]) -> int:
    return len(ndjson(team["owner"].get("/v1/audit", params={"space": team["space"]}).text))


def test_screening_allows_page_and_the_admins_allow_form(hub_app: dict[str, Any],
                                                         team: dict[str, Any]) -> None:
    data = {"entry": "page/deploy", "version": VERSION, "rule": "aws_access_key"}
    # a viewer: both pages, no allow form
    vb = sign_in(hub_app, team["viewer"])
    page = vb.get("/console/spaces/team/screening")
    assert page.status_code == 200 and "No allows." in page.text
    assert ALLOW not in page.text and "Allow a finding" not in page.text
    assert vb.get(PAGE).status_code == 200
    # an editor's POST to the allow action is refused (the API's check) and writes nothing
    eb = sign_in(hub_app, team["ed"])
    csrf = _csrf(eb.get("/console/spaces/team/screening").text)
    before = _audit(team)
    for extra in ({}, {"confirm": "yes"}):
        r = eb.post(ALLOW, data={"csrf": csrf, **data, **extra}, headers=_origin(hub_app))
        assert r.status_code == 403 and "forbidden" in r.text
    assert _allows(team) == [] and _audit(team) == before

    # an admin: the form, a preview that writes nothing, then the confirmed allow
    ob = sign_in(hub_app, team["owner"])
    page = ob.get("/console/spaces/team/screening").text
    assert f'action="{ALLOW}"' in page
    csrf = _csrf(page)
    r = ob.post(ALLOW, data={"csrf": csrf, **data}, headers=_origin(hub_app))
    assert r.status_code == 200 and "Preview:" in r.text and "Confirm allow" in r.text
    assert 'name="confirm" value="yes"' in r.text and VERSION in r.text
    assert _allows(team) == [] and _audit(team) == before
    # without the CSRF token: refused, nothing written
    r = ob.post(ALLOW, data={**data, "confirm": "yes"}, headers=_origin(hub_app))
    assert r.status_code in (400, 403) and _allows(team) == []
    # a bad version: the API's invalid_request, nothing written
    r = ob.post(ALLOW, data={"csrf": csrf, **data, "version": "12", "confirm": "yes"},
                headers=_origin(hub_app))
    assert r.status_code == 422 and "invalid_request" in r.text and _allows(team) == []
    r = ob.post(ALLOW, data={"csrf": csrf, **data, "confirm": "yes"},
                headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == \
        "/console/spaces/team/screening?done=allowed"
    allows = _allows(team)
    assert [(a["entry"], a["version"], a["rule"]) for a in allows] == [
        ("page/deploy", VERSION, "aws_access_key")]
    assert _audit(team) == before + 1  # audited as screening.allow, like the API's
    assert "aws_access_key" in vb.get("/console/spaces/team/screening").text
