"""Roles, rules, delegation and the audit chain through the API (in-process hub)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import update

from hub import audit
from hub.store.schema import audit as audit_table
from replica.cli.identity import verify_audit_events
from replica.hubclient.auth import DPoPAuth
from replica.hubclient.client import HubClient
from replica.machine.credentials import CredentialFile, Tokens
from shared.dpop import make_proof
from shared.signing import save_private
from tests.kit.wire import WireTeam, ndjson, put


def test_viewer_cannot_publish(team: WireTeam) -> None:
    r = team.viewer.publish(team.space, [put("page/from-viewer")])
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    assert r.json()["error"]["details"]["role"] == "viewer"


def test_guardrail_rule_refuses_the_whole_batch_and_lists_every_denied_op(team: WireTeam) -> None:
    t = team
    r = t.owner.post(f"/v1/spaces/{t.space}/rules", {
        "who": "editor", "actions": ["create", "update", "delete"], "entries": "guardrail/*"})
    assert r.status_code == 201, r.text
    rule_id = r.json()["rule"]["id"]
    try:
        # the head tells the editor its role and the rule that applies (to refuse early)
        head = t.editor.head(t.space)
        assert head["role"] == "editor" and [x["id"] for x in head["rules"]] == [
            "default:guardrails-additive", rule_id]  # the typed default, then the space's
        assert t.owner.head(t.space)["rules"] == []  # admins are not under an editor rule
        assert t.editor.publish(t.space, [put("page/allowed")]).status_code == 201
        before = t.counts()
        r = t.editor.publish(t.space, [put("page/with-guardrails"), put("guardrail/no-prod"),
                                       put("guardrail/no-secrets")])
        assert r.status_code == 403, r.text
        err = r.json()["error"]
        assert err["code"] == "policy_denied"
        assert sorted(d["id"] for d in err["details"]["denied"]) == [
            "guardrail/no-prod", "guardrail/no-secrets"]
        assert all(d["action"] == "create" and d["rule"] == rule_id
                   for d in err["details"]["denied"])
        assert t.counts()["entries"] == before["entries"]  # not even the page
        assert t.owner.publish(t.space, [put("guardrail/by-admin")]).status_code == 201
    finally:
        t.owner.post(f"/v1/spaces/{t.space}/rules/{rule_id}/remove", {})


def test_rule_changes_bump_rules_version_and_dry_run_changes_nothing(team: WireTeam) -> None:
    t = team
    v0 = t.owner.get(f"/v1/spaces/{t.space}/rules").json()["rules_version"]
    r = t.owner.post(f"/v1/spaces/{t.space}/rules",
                     {"who": "agents", "actions": ["delete"], "entries": "*"})
    rid = r.json()["rule"]["id"]
    dry = t.owner.post(f"/v1/spaces/{t.space}/rules/{rid}/remove", {"dry_run": True})
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    listed = t.owner.get(f"/v1/spaces/{t.space}/rules").json()
    assert rid in [x["id"] for x in listed["rules"]] and listed["rules_version"] == v0 + 1
    assert t.owner.post(f"/v1/spaces/{t.space}/rules/{rid}/remove", {}).status_code == 200
    assert t.owner.get(f"/v1/spaces/{t.space}/rules").json()["rules_version"] == v0 + 2
    # a dry-run removal of a member keeps the member
    m = t.member("viewer", "kept")
    r = t.owner.post(f"/v1/spaces/{t.space}/members/{m.user_id}/remove", {"dry_run": True})
    assert r.json() == {"user_id": m.user_id, "removed": True, "previous": "viewer",
                        "dry_run": True}
    assert m.get(f"/v1/spaces/{t.space}/head").status_code == 200
    # editors do not manage rules
    r = t.editor.post(f"/v1/spaces/{t.space}/rules",
                      {"who": "editor", "actions": ["create"], "entries": "*"})
    assert r.status_code == 403


def test_delegated_agent_publishes_as_itself(team: WireTeam) -> None:
    t = team
    d = t.delegate(t.editor, "write", agent="claude-code")
    token = d["token"]
    body = t.editor.batch(t.space, [put("note/by-agent")])
    path = f"/v1/spaces/{t.space}/batches"
    r = t.raw.post(path, json=body, headers={
        "Authorization": f"DPoP {token}",
        "DPoP": make_proof(t.editor.key, "POST", t.url + path, access_token=token)})
    assert r.status_code == 201, r.text
    lines = ndjson(t.editor.get(f"/v1/spaces/{t.space}/changes?after=0").text)
    mine = [x for x in lines[:-1] if x["batch"]["batch_id"] == body["batch_id"]]
    assert mine[0]["author"]["agent"] == "claude-code"
    events = ndjson(t.owner.get(f"/v1/audit?space={t.space}").text)
    pub = [e for e in events if e.get("action") == "publish"
           and e["details"]["batch_id"] == body["batch_id"]]
    assert pub[0]["actor"] == {"user": t.editor.user_id, "device": t.editor.device_id,
                               "agent": "claude-code",
                               "delegation": d["delegation"]["id"]}  # and under which grant
    listed = t.editor.get("/v1/delegations").json()["delegations"]
    assert d["delegation"]["id"] in [x["id"] for x in listed]


def test_a_delegation_lists_only_its_own_space_with_its_own_role(team: WireTeam) -> None:
    t = team
    t.owner.create_space("not-for-the-agent")
    assert len(t.owner.get("/v1/spaces").json()["spaces"]) >= 2
    for grant, role in ((t.delegate(t.owner, "write", agent="w"), "editor"),
                        (t.delegate(t.owner, "read", agent="r"), "viewer")):
        path = "/v1/spaces"
        r = t.raw.get(path, headers={
            "Authorization": f"DPoP {grant['token']}",
            "DPoP": make_proof(t.owner.key, "GET", t.url + path, access_token=grant["token"])})
        assert r.status_code == 200, r.text
        assert [(s["id"], s["role"]) for s in r.json()["spaces"]] == [(t.space, role)]


def test_delegation_is_at_most_a_day(team: WireTeam) -> None:
    r = team.editor.post("/v1/delegations", {"space": team.space, "agent": "a",
                                             "scope": "read", "ttl_seconds": 86401})
    assert r.status_code == 422


def test_audit_chain_verifies_and_one_altered_event_fails_there(team_db: WireTeam) -> None:
    t = team_db
    t.editor.publish(t.space, [put("page/audited")])
    t.owner.post(f"/v1/spaces/{t.space}/rules", {"who": "editor", "actions": ["delete"],
                                                 "entries": "page/*"})
    t.owner.post(f"/v1/devices/{t.viewer.device_id}/revoke", {})
    r = t.owner.get("/v1/audit/verify")
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    events = [e for e in ndjson(t.owner.get("/v1/audit").text) if "end" not in e]
    actions = {e["action"] for e in events}
    assert {"hub.init", "invite.redeem", "space.create", "publish", "rule.add",
            "device.revoke"} <= actions
    assert verify_audit_events(events) == (True, None)
    assert audit.verify_events(events) == (True, None)

    victim = [e for e in events if e["chain"] == t.space][2]
    with t.hub.store.engine.begin() as conn:
        conn.execute(update(audit_table).where(
            (audit_table.c.chain == victim["chain"]) & (audit_table.c.n == victim["n"]))
            .values(details=json.dumps({"forged": True})))
    r = t.owner.get("/v1/audit/verify").json()
    assert r["ok"] is False and (r["first_bad"]["chain"], r["first_bad"]["n"]) == (
        victim["chain"], victim["n"])
    tampered = [e for e in ndjson(t.owner.get("/v1/audit").text) if "end" not in e]
    ok, bad = verify_audit_events(tampered)
    assert not ok and bad is not None and bad["n"] == victim["n"]


def test_replica_auth_refreshes_an_expired_token_and_persists_the_rotation(
        team: WireTeam, tmp_path: Path) -> None:
    t = team
    m = t.member("editor", "auth-flow")
    key_path = tmp_path / "device.pem"
    save_private(m.key, key_path)
    creds = CredentialFile(tmp_path / "credential", key_path)
    creds.save(Tokens(m.token, m.refresh_token, 0, t.url))  # already expired locally
    auth = DPoPAuth(m.key, creds.load(), credentials=creds)  # type: ignore[arg-type]
    client = HubClient("http://testhub", auth=auth, transport=t.client._transport,
                       hub_key=t.hub.key.public)
    try:
        assert client.head(t.space)["space"] == t.space
        saved = creds.load()
        assert saved is not None and saved.refresh_token != m.refresh_token
        assert saved.access_token != m.token
        # the hub says the token expired (e.g. clocks differ): refresh once and retry
        from hub.tokens import issue_access_token
        from shared.signing import jwk_thumbprint, public_b64

        old, _ = issue_access_token(t.hub.key, aud=t.url, user_id=m.user_id,
                                    device_id=m.device_id, jkt=jwk_thumbprint(public_b64(m.key)),
                                    now_ms=t.hub.now() - 20 * 60 * 1000, ttl_s=600)
        auth2 = DPoPAuth(m.key, Tokens(old, saved.refresh_token, 2**40, t.url),
                         credentials=creds)
        with HubClient("http://testhub", auth=auth2, transport=t.client._transport,
                       hub_key=t.hub.key.public) as client2:
            assert client2.spaces()  # refreshed behind the scenes, then retried
        assert auth2.tokens.access_token != old
    finally:
        client.close()


def test_two_processes_sharing_a_credential_do_not_trip_reuse_detection(
        team: WireTeam, tmp_path: Path) -> None:
    """A sync and a watcher of one machine refresh in turn: the second adopts the rotated
    credential from the file instead of presenting the old one (which would revoke all)."""
    t = team
    m = t.member("editor", "two-procs")
    key_path = tmp_path / "device.pem"
    save_private(m.key, key_path)
    creds = CredentialFile(tmp_path / "credential", key_path)
    creds.save(Tokens(m.token, m.refresh_token, 0, t.url))
    a = DPoPAuth(m.key, creds.load(), credentials=creds)  # type: ignore[arg-type]
    b = DPoPAuth(m.key, creds.load(), credentials=creds)  # type: ignore[arg-type]
    ca = HubClient("http://testhub", auth=a, transport=t.client._transport)
    cb = HubClient("http://testhub", auth=b, transport=t.client._transport)
    try:
        assert ca.spaces() and cb.spaces()
        assert a.tokens.refresh_token == b.tokens.refresh_token == creds.load().refresh_token  # type: ignore[union-attr]
    finally:
        ca.close()
        cb.close()




def test_event_stream_check_refuses_a_delegation_that_expired_mid_stream(team: WireTeam) -> None:
    # an event stream outlives the request that opened it; since head events carry entry
    # content, its periodic check must also see a delegation's expiry (not only revocation)
    from sqlalchemy import update as sa_update

    from hub.access import Principal
    from hub.api.events import _check
    from hub.store.schema import delegations
    from shared.errors import Unauthorized

    t = team
    d = t.delegate(t.editor, "read", agent="streamer")["delegation"]
    p = Principal(t.editor.user_id, t.editor.device_id, "editor", False, "streamer",
                  d["id"], "read", d["space"])
    assert _check(t.hub, p, t.space)["space"] == d["space"]  # valid: the stream goes on
    t.hub.store.run_write(lambda c: c.execute(sa_update(delegations).where(
        delegations.c.id == d["id"]).values(expires_at=t.hub.now() - 1)))
    try:
        _check(t.hub, p, t.space)
    except Unauthorized as e:
        assert e.details.get("reason") == "delegation_expired"
    else:
        raise AssertionError("an expired delegation kept its event stream")
