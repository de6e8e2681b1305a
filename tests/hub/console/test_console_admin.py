"""The console's administration pages on the real hub app (in-process, SQLite and
PostgreSQL): every change is previewed first (nothing changes) and made only by the
confirming POST; a member's POST to each admin action is refused and changes nothing; a POST
without the CSRF token or from another origin changes nothing. "Nothing changed" is read
through the API as the owner (members, invites, rules, replicas, delegations, the epoch) and
the space's audit chain (every admin change appends to it)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.hub.console.test_console_inproc import _csrf, _origin, members, sign_in
from tests.kit.wire import delete, ndjson, put


@pytest.fixture
def team(hub_app: dict[str, Any]) -> dict[str, Any]:
    t = members(hub_app)
    owner, space, ed, viewer = t["owner"], t["space"], t["ed"], t["viewer"]
    assert ed.publish(space, [put("page/deploy", "Deploy <b>now</b>.\n")]).status_code == 201
    r = ed.post("/v1/delegations", {"agent": "claude-code", "scope": "write", "space": space})
    assert r.status_code in (200, 201), r.text
    invite = owner.invite(space, "editor")
    return {"owner": owner, "ed": ed, "viewer": viewer, "space": space,
            "delegation": r.json()["delegation"]["id"], "replica": ed.replica(space),
            "invite_code": invite}


def state(team: dict[str, Any]) -> dict[str, Any]:
    """Everything an admin action could change, read through the API by the owner."""
    o, s = team["owner"], team["space"]
    audit = ndjson(o.get("/v1/audit", params={"space": s}).text)
    return {"members": o.get(f"/v1/spaces/{s}/members").json()["members"],
            "invites": o.get(f"/v1/spaces/{s}/invites").json()["invites"],
            "rules": o.get(f"/v1/spaces/{s}/rules").json()["rules"],
            "replicas": o.get(f"/v1/spaces/{s}/replicas").json()["replicas"],
            "delegations": [team[w].get("/v1/delegations").json()["delegations"]
                            for w in ("ed", "owner")],
            "epoch": o.head(s)["epoch"], "audit": len(audit)}


def _ids(team: dict[str, Any]) -> dict[str, str]:
    o, s = team["owner"], team["space"]
    inv = next(i for i in o.get(f"/v1/spaces/{s}/invites").json()["invites"]
               if i["used_at"] is None)
    r = o.post(f"/v1/spaces/{s}/rules", {"effect": "deny", "who": "agents",
                                         "actions": ["create"], "entries": "skill/*"})
    assert r.status_code in (200, 201), r.text
    d = o.post("/v1/delegations", {"agent": "owner-bot", "scope": "read", "space": s})
    assert d.status_code in (200, 201), d.text
    return {"user": team["viewer"].user_id, "invite": inv["id"], "rule": r.json()["rule"]["id"],
            "replica": team["replica"], "delegation": team["delegation"],
            # the owner's: a member may revoke their own replica or delegation (the API
            # allows it), never someone else's
            "owner_replica": o.replica(s), "owner_delegation": d.json()["delegation"]["id"]}


def admin_posts(ids: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """Every admin action of the console, confirmed (as the second POST would be)."""
    a = "/console/admin/spaces/team"
    return [(f"{a}/members/{ids['user']}/role", {"role": "admin"}),
            (f"{a}/invites/{ids['invite']}/revoke", {}),
            (f"{a}/rules/{ids['rule']}/remove", {}),
            (f"{a}/replicas/{ids['replica']}/revoke", {}),
            (f"{a}/delegations/{ids['delegation']}/revoke", {}),
            (f"{a}/epoch", {"reason": "restored from backup"}),
            ("/console/spaces/team/invites", {"role": "admin"}),
            ("/console/spaces/team/rules", {"effect": "allow", "who": "agents",
                                            "actions": "delete", "entries": "*"})]


ADMIN_PAGES = ["/console/spaces/team/members", "/console/admin/spaces/team/rules",
               "/console/admin/spaces/team/access", "/console/admin/spaces/team/epoch",
               "/console/admin/spaces/team/audit", "/console/admin/spaces/team/audit.jsonl",
               "/console/admin/audit", "/console/admin/audit.jsonl"]


def _preview_then_confirm(h: dict[str, Any], b: Any, team: dict[str, Any], path: str,
                          data: dict[str, str], page: str, button: str) -> str:
    """POST once: a preview, nothing changed; POST again with confirm=yes: done."""
    before = state(team)
    csrf = _csrf(b.get(page).text)
    r = b.post(path, data={"csrf": csrf, **data}, headers=_origin(h))
    assert r.status_code == 200 and "Preview:" in r.text and button in r.text, r.text
    assert 'name="confirm" value="yes"' in r.text
    assert state(team) == before
    r = b.post(path, data={"csrf": csrf, **data, "confirm": "yes"}, headers=_origin(h),
               follow_redirects=False)
    assert r.status_code == 303, r.text
    return r.text


def test_an_admin_changes_roles_access_and_epoch_after_previews(
        hub_app: dict[str, Any], team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["owner"])
    members = b.get("/console/spaces/team/members").text
    path = f"/console/admin/spaces/team/members/{team['viewer'].user_id}/role"
    assert f'action="{path}"' in members
    r = b.post(path, data={"csrf": _csrf(members), "role": "editor"}, headers=_origin(hub_app))
    # the preview says what the change allows: publishing, and the default guardrail rule
    assert "They would gain" in r.text and "publish changes" in r.text
    assert "default:guardrails-additive" in r.text
    _preview_then_confirm(hub_app, b, team, path, {"role": "editor"},
                          "/console/spaces/team/members", "Confirm role change")
    roles = {m["user_id"]: m["role"] for m in state(team)["members"]}
    assert roles[team["viewer"].user_id] == "editor"
    # an unknown role is the API's invalid_request, and changes nothing
    before = state(team)
    r = b.post(path, data={"csrf": _csrf(members), "role": "root", "confirm": "yes"},
               headers=_origin(hub_app))
    assert r.status_code == 422 and "invalid_request" in r.text
    assert state(team) == before

    # invites, agents, replicas and the epoch: each previewed, then confirmed
    ids = _ids(team)
    members = b.get("/console/spaces/team/members").text
    assert ids["invite"] in members and "Revoke the editor invite made" in members
    _preview_then_confirm(hub_app, b, team, f"/console/admin/spaces/team/invites/"
                          f"{ids['invite']}/revoke", {}, "/console/spaces/team/members",
                          "Confirm revoke")
    r = hub_app["client"].post("/v1/invites/redeem", json={"code": team["invite_code"]})
    assert r.status_code >= 400  # the revoked code no longer joins
    access = b.get("/console/admin/spaces/team/access").text
    assert "claude-code" in access and "editor-laptop" in access
    _preview_then_confirm(hub_app, b, team, f"/console/admin/spaces/team/delegations/"
                          f"{ids['delegation']}/revoke", {}, "/console/admin/spaces/team/access",
                          "Confirm revoke")
    _preview_then_confirm(hub_app, b, team, f"/console/admin/spaces/team/replicas/"
                          f"{ids['replica']}/revoke", {}, "/console/admin/spaces/team/access",
                          "Confirm revoke")
    s = state(team)
    assert all(d["revoked_at"] for d in s["delegations"][0])
    assert all(r["revoked_at"] for r in s["replicas"] if r["id"] == ids["replica"])
    # the epoch: the impact preview names the head left behind, then the bump happens
    epoch = s["epoch"]
    r = b.post("/console/admin/spaces/team/epoch",
               data={"csrf": _csrf(access), "reason": "restored <from> backup"},
               headers=_origin(hub_app))
    assert "in the epoch left behind</dt><dd>1</dd>" in r.text
    assert "Replicas that must take a snapshot" in r.text
    assert "restored &lt;from&gt; backup" in r.text and "<from>" not in r.text
    _preview_then_confirm(hub_app, b, team, "/console/admin/spaces/team/epoch",
                          {"reason": "restored from backup"}, "/console/admin/spaces/team/epoch",
                          "Confirm epoch bump")
    assert state(team)["epoch"] != epoch


def test_rules_preview_and_the_audit_log(hub_app: dict[str, Any],
                                         team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["owner"])
    _ids(team)  # adds: deny agents create skill/*
    r = b.get("/console/admin/spaces/team/rules")
    assert "default:guardrails-additive" in r.text and "skill/*" in r.text

    def verdicts(**q: str) -> dict[str, str]:
        page = b.get("/console/admin/spaces/team/rules", params=q).text
        rows = page.split('class="verdicts"')[1].split("</table>")[0]
        return dict(re.findall(r"<tr><td>([a-z ()]+)</td><td class=\"\w+\">(\w+)</td>", rows))

    ed = team["ed"].user_id
    assert verdicts(user=ed, entry="skill/x") == {
        "create": "allowed", "update": "allowed", "delete": "allowed"}
    assert verdicts(user=ed, agent="claude-code", entry="skill/x")["create"] == "denied"
    v = verdicts(user=ed, entry="guardrail/x")
    assert v["update (weakening)"] == "denied" and v["create"] == "allowed"
    assert set(verdicts(user=team["viewer"].user_id, entry="page/x").values()) == {"denied"}
    # the owner (admin) may weaken a guardrail; through an agent they are an editor
    own = team["owner"].user_id
    assert verdicts(user=own, entry="guardrail/x")["update (weakening)"] == "allowed"
    assert verdicts(user=own, agent="bot", entry="guardrail/x")["update (weakening)"] == "denied"
    # the preview is the guard's verdict: what it says the editor may not do, the hub refuses
    g = put("guardrail/x", "Never force push.\n", meta={"severity": "block"})
    assert team["ed"].publish(team["space"], [g]).status_code == 201
    assert verdicts(user=ed, entry="guardrail/x")["delete"] == "denied"
    r = team["ed"].publish(team["space"], [delete("guardrail/x", g.entry.version)])
    assert r.status_code == 403 and r.json()["error"]["code"] == "policy_denied", r.text
    # a guardrail by its front matter, in any folder, is previewed as one (D139)
    fm = put("Ops/No Friday", "No deploys on a Friday.\n",
             meta={"kind": "guardrail", "severity": "block"})
    assert team["owner"].publish(team["space"], [fm]).status_code == 201
    v = verdicts(user=ed, entry="Ops/No Friday")
    assert v["update (weakening)"] == "denied" and v["delete"] == "denied", v
    assert verdicts(user=ed, agent="claude-code", entry="skill/y")["create"] == "denied"
    r = b.get("/console/admin/spaces/team/rules", params={"user": ed, "entry": "../no id"})  # not an id (any path is)
    assert r.status_code == 422 and "invalid_request" in r.text

    # a new invite and a new rule: previewed (no code made, no rule added), then made
    members = b.get("/console/spaces/team/members").text
    before = state(team)
    for path, data, made in (
            ("/console/spaces/team/invites", {"role": "viewer"}, "Confirm create invite"),
            ("/console/spaces/team/rules", {"effect": "deny", "who": "editor",
                                            "actions": "delete", "entries": "page/*"},
             "Confirm add rule")):
        r = b.post(path, data={"csrf": _csrf(members), **data}, headers=_origin(hub_app))
        assert r.status_code == 200 and made in r.text and "qi_" not in r.text, r.text
        assert state(team) == before
    r = b.post("/console/spaces/team/invites", headers=_origin(hub_app),
               data={"csrf": _csrf(members), "role": "viewer", "confirm": "yes"})
    assert r.status_code == 200 and "qi_" in r.text
    r = b.post("/console/spaces/team/rules", headers=_origin(hub_app), data={
        "csrf": _csrf(members), "effect": "deny", "who": "editor", "actions": "delete",
        "entries": "page/*", "confirm": "yes"}, follow_redirects=False)
    assert r.status_code == 303
    after = state(team)
    assert len(after["invites"]) == len(before["invites"]) + 1
    assert [x["entries"] for x in after["rules"]][-1] == "page/*"
    # an invite for someone: their name is offered at join (D138), shown as text
    r = b.post("/console/spaces/team/invites", headers=_origin(hub_app), data={
        "csrf": _csrf(members), "role": "editor", "name": "Dana <i>D</i>"})
    assert r.status_code == 200 and "Dana &lt;i&gt;D&lt;/i&gt;" in r.text  # the preview
    r = b.post("/console/spaces/team/invites", headers=_origin(hub_app), data={
        "csrf": _csrf(members), "role": "editor", "name": "Dana <i>D</i>", "confirm": "yes"})
    assert r.status_code == 200 and "qi_" in r.text
    assert state(team)["invites"][-1]["name"] == "Dana <i>D</i>"
    assert "<td>Dana &lt;i&gt;D&lt;/i&gt;</td>" in b.get("/console/spaces/team/members").text

    # the audit log of the same space
    r = b.get("/console/admin/spaces/team/audit")
    assert "Chain verified" in r.text and "rule.add" in r.text and "delegation.create" in r.text
    r = b.get("/console/admin/spaces/team/audit", params={"action": "rule."})
    assert "rule.add" in r.text and "delegation.create" not in r.text
    r = b.get("/console/admin/spaces/team/audit", params={"actor": "claude"})
    assert "No matching events" in r.text  # the delegation was made by the member, no agent
    r = b.get("/console/admin/spaces/team/audit", params={"since": "2999-01-01"})
    assert "No matching events" in r.text
    r = b.get("/console/admin/spaces/team/audit", params={"since": "yesterday"})
    assert r.status_code == 422
    r = b.get("/console/admin/spaces/team/audit.jsonl", params={"action": "delegation."})
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert [e["action"] for e in lines[:-1]] == ["delegation.create"] * 2
    assert lines[-1] == {"end": {"count": 2}}
    r = b.get("/console/admin/spaces/team/audit.jsonl")
    # unfiltered, the export is the API's, byte for byte
    assert r.text == team["owner"].get("/v1/audit", params={"space": team["space"]}).text
    # a hub owner reads every chain: the hub's own (the owner's invite) and the space's
    r = b.get("/console/admin/audit", params={"action": "invite.redeem"})
    assert "Chain verified" in r.text and "Audit log of the hub" in r.text
    assert re.search(r'<td class="nw">the hub</td>', r.text) and '<td class="nw">team</td>' in r.text
    r = b.get("/console/admin/audit.jsonl")
    assert r.text == team["owner"].get("/v1/audit").text


def test_members_and_forged_forms_are_refused_and_change_nothing(
        hub_app: dict[str, Any], team: dict[str, Any]) -> None:
    ids = _ids(team)
    for who in ("ed", "viewer"):
        b = sign_in(hub_app, team[who])
        space = b.get("/console/spaces/team").text
        assert "/console/admin/" not in space and "Members, invites" not in space
        for path in ADMIN_PAGES:
            r = b.get(path)
            assert r.status_code == 403, (who, path, r.status_code)
        csrf = _csrf(space)
        before = state(team)
        theirs = dict(ids, replica=ids["owner_replica"], delegation=ids["owner_delegation"])
        for path, data in admin_posts(theirs):
            for confirm in ("", "yes"):
                r = b.post(path, data={"csrf": csrf, **data, "confirm": confirm},
                           headers=_origin(hub_app))
                # 403 for the space's admin actions; a replica or delegation that is not
                # theirs is not_found (the API's answer)
                assert r.status_code in (403, 404), (who, path, r.status_code, r.text)
        assert state(team) == before, who

    # the owner's own forms, without a valid CSRF token or from another origin
    b = sign_in(hub_app, team["owner"])
    csrf = _csrf(b.get("/console/spaces/team/members").text)
    before = state(team)
    for path, data in admin_posts(ids):
        for extra, headers in (({}, _origin(hub_app)),
                               ({"csrf": "0" * 64}, _origin(hub_app)),
                               ({"csrf": csrf}, {"Origin": "https://evil.example"}),
                               ({"csrf": csrf}, {})):
            r = b.post(path, data={**data, **extra, "confirm": "yes"}, headers=headers)
            assert r.status_code == 403, (path, extra, headers, r.text)
    assert state(team) == before
