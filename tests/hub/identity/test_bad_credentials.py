"""A table of bad credentials and proofs, each refused with its code and reason, and none
changing anything it should not. One hub per module (SQLite); cases that revoke something
make their own member first."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import OKPKey

from shared.dpop import make_proof
from shared.ids import new_id
from shared.signing import jwk_thumbprint, new_private_key, public_b64
from tests.hub.identity.conftest import b64, claims_of
from tests.kit.wire import WireTeam, put, redeem

HEAD = "/v1/spaces/{space}/head"


def _get(t: WireTeam, path: str, token: str, proof: str | None) -> Any:
    headers = {"Authorization": f"DPoP {token}"}
    if proof is not None:
        headers["DPoP"] = proof
    return t.raw.get(path, headers=headers)


def _signed_get(t: WireTeam, m: Any, path: str, token: str | None = None, **proof_kw: Any) -> Any:
    """GET ``path`` with ``token`` (default: m's) and a proof by m's key (overridable)."""
    token = token or m.token
    key = proof_kw.pop("key", m.key)
    method = proof_kw.pop("method", "GET")
    url = proof_kw.pop("url", t.url + path)
    return _get(t, path, token, make_proof(key, method, url, access_token=token, **proof_kw))


def _forge(t: WireTeam, m: Any, *, header: dict[str, Any] | None = None,
           claims: dict[str, Any] | None = None, key: Any = None) -> str:
    """A token like m's, with header/claims changed, signed by ``key`` (default: hub key)."""
    c = dict(claims_of(m.token), **(claims or {}))
    h = {"alg": "Ed25519", "typ": "at+jwt", "kid": t.hub.key.kid, **(header or {})}
    h = {k: v for k, v in h.items() if v is not None}
    c = {k: v for k, v in c.items() if v is not None}
    return jwt.encode(h, c, OKPKey.import_key(key or t.hub.key.private), algorithms=["Ed25519"],
                      default_type=None)


def _head(t: WireTeam) -> str:
    return HEAD.format(space=t.space)


# ---------------------------------------------------------------- cases


def no_token(t: WireTeam) -> Any:
    return t.raw.get(_head(t))


def bearer_scheme(t: WireTeam) -> Any:
    return t.raw.get(_head(t), headers={"Authorization": f"Bearer {t.editor.token}"})


def alg_none(t: WireTeam) -> Any:
    c = claims_of(t.editor.token)
    token = b64({"alg": "none", "typ": "at+jwt", "kid": t.hub.key.kid}) + "." + b64(c) + "."
    return _signed_get(t, t.editor, _head(t), token)


def hs256_with_public_key(t: WireTeam) -> Any:
    c = claims_of(t.editor.token)
    signing = (b64({"alg": "HS256", "typ": "at+jwt", "kid": t.hub.key.kid}) + "."
               + b64(c)).encode()
    mac = hmac.new(t.hub.key.public.encode(), signing, hashlib.sha256).digest()
    return _signed_get(t, t.editor, _head(t), signing.decode() + "." + b64(mac))


def signed_by_another_key(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), _forge(t, t.editor, key=new_private_key()))


def tampered_claims(t: WireTeam) -> Any:
    token = t.editor.token
    parts = token.split(".")
    parts[1] = b64(dict(claims_of(token), sub=t.owner.user_id))
    return _signed_get(t, t.editor, _head(t), ".".join(parts))


def unknown_kid(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), _forge(t, t.editor, header={"kid": "nope"}))


def expired(t: WireTeam) -> Any:
    now = int(time.time())
    return _signed_get(t, t.editor, _head(t), _forge(
        t, t.editor, claims={"iat": now - 700, "nbf": now - 700, "exp": now - 100}))


def not_yet_valid(t: WireTeam) -> Any:
    now = int(time.time())
    return _signed_get(t, t.editor, _head(t), _forge(
        t, t.editor, claims={"nbf": now + 600, "exp": now + 1200}))


def wrong_audience(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t),
                       _forge(t, t.editor, claims={"aud": "https://other.example"}))


def missing_typ(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), _forge(t, t.editor, header={"typ": None}))


def typ_plain_jwt(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), _forge(t, t.editor, header={"typ": "JWT"}))


def token_bound_to_another_key(t: WireTeam) -> Any:
    other = new_private_key()
    token = _forge(t, t.editor, claims={"cnf": {"jkt": jwk_thumbprint(public_b64(other))}})
    return _signed_get(t, t.editor, _head(t), token, key=other)


def delegated_token_for_another_space(t: WireTeam) -> Any:
    other = t.owner.create_space("elsewhere-" + new_id()[-6:].lower())
    m = t.member("editor", "two-spaces")
    r = t.owner.post(f"/v1/spaces/{other}/invites", {"role": "editor"})
    m.post("/v1/invites/redeem", {"code": r.json()["code"], "device_name": "two-spaces",
                                  "device_key": public_b64(m.key)})
    d = t.delegate(m, "read", space=other)
    return _signed_get(t, m, _head(t), d["token"])


def dpop_missing(t: WireTeam) -> Any:
    return _get(t, _head(t), t.editor.token, None)


def dpop_by_another_key(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), key=new_private_key())


def dpop_replayed_jti(t: WireTeam) -> Any:
    proof = make_proof(t.editor.key, "GET", t.url + _head(t), access_token=t.editor.token)
    first = _get(t, _head(t), t.editor.token, proof)
    assert first.status_code == 200, first.text
    return _get(t, _head(t), t.editor.token, proof)


def dpop_wrong_method(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), method="POST")


def dpop_wrong_url(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), url=t.url + "/v1/spaces")


def dpop_other_host(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), url="https://evil.example" + _head(t))


def dpop_stale_iat(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), iat=int(time.time()) - 600)


def dpop_future_iat(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), iat=int(time.time()) + 600)


def dpop_wrong_typ(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), extra_header={"typ": "JWT"})


def dpop_ath_of_another_token(t: WireTeam) -> Any:
    proof = make_proof(t.editor.key, "GET", t.url + _head(t), access_token=t.viewer.token)
    return _get(t, _head(t), t.editor.token, proof)


def dpop_embeds_private_key(t: WireTeam) -> Any:
    return _signed_get(t, t.editor, _head(t), extra_header={"jwk": {
        "kty": "OKP", "crv": "Ed25519", "x": public_b64(t.editor.key), "d": "AAAA"}})


def refresh_without_proof(t: WireTeam) -> Any:
    return t.raw.post("/v1/token", json={"grant_type": "refresh_token",
                                         "refresh_token": t.editor.refresh_token})


def refresh_by_another_key(t: WireTeam) -> Any:
    m = t.member("viewer", "refresher")
    return t.raw.post("/v1/token", json={"grant_type": "refresh_token",
                                         "refresh_token": m.refresh_token},
                      headers={"DPoP": make_proof(new_private_key(), "POST", t.url + "/v1/token")})


def _refresh(t: WireTeam, m: Any, token: str) -> Any:
    return t.raw.post("/v1/token", json={"grant_type": "refresh_token", "refresh_token": token},
                      headers={"DPoP": make_proof(m.key, "POST", t.url + "/v1/token")})


def refresh_replayed_after_rotation(t: WireTeam) -> Any:
    m = t.member("viewer", "rotator")
    first = _refresh(t, m, m.refresh_token)
    assert first.status_code == 200, first.text
    replay = _refresh(t, m, m.refresh_token)
    # the whole family is gone: even the newest credential no longer works
    newest = _refresh(t, m, first.json()["refresh_token"])
    assert newest.status_code == 401, newest.text
    assert newest.json()["error"]["details"]["reason"] == "refresh_revoked"
    return replay


def delegated_on_admin_endpoint(t: WireTeam) -> Any:
    d = t.delegate(t.owner, "write")
    return _signed_get(t, t.owner, f"/v1/spaces/{t.space}/members", d["token"])


def delegated_minting_a_delegation(t: WireTeam) -> Any:
    d = t.delegate(t.editor, "write")
    path = "/v1/delegations"
    return t.raw.post(path, json={"space": t.space, "agent": "child", "scope": "read"},
                      headers={"Authorization": f"DPoP {d['token']}",
                               "DPoP": make_proof(t.editor.key, "POST", t.url + path,
                                                  access_token=d["token"])})


def delegated_read_token_publishing(t: WireTeam) -> Any:
    d = t.delegate(t.editor, "read")
    body = t.editor.batch(t.space, [put("page/by-reader-agent")])
    path = f"/v1/spaces/{t.space}/batches"
    return t.raw.post(path, json=body, headers={
        "Authorization": f"DPoP {d['token']}",
        "DPoP": make_proof(t.editor.key, "POST", t.url + path, access_token=d["token"])})


def revoked_delegation(t: WireTeam) -> Any:
    d = t.delegate(t.editor, "read")
    r = t.editor.post(f"/v1/delegations/{d['delegation']['id']}/revoke", {})
    assert r.status_code == 200, r.text
    return _signed_get(t, t.editor, _head(t), d["token"])


def revoked_device(t: WireTeam) -> Any:
    m = t.member("editor", "stolen-laptop")
    r = t.owner.post(f"/v1/devices/{m.device_id}/revoke", {})
    assert r.status_code == 200, r.text
    return m.get(_head(t))


def deactivated_user(t: WireTeam) -> Any:
    m = t.member("editor", "departed")
    dry = t.owner.post(f"/v1/users/{m.user_id}/deactivate", {"dry_run": True})
    assert dry.json()["dry_run"] is True and m.get(_head(t)).status_code == 200
    r = t.owner.post(f"/v1/users/{m.user_id}/deactivate", {})
    assert r.status_code == 200, r.text
    assert _refresh(t, m, m.refresh_token).json()["error"]["details"]["reason"] == \
        "device_revoked"
    return m.get(_head(t))


def revoked_replica(t: WireTeam) -> Any:
    m = t.member("editor", "replica-owner")
    rid = m.replica(t.space)
    r = t.owner.post(f"/v1/spaces/{t.space}/replicas/{rid}/revoke", {})
    assert r.status_code == 200, r.text
    return m.publish(t.space, [put("page/from-revoked-replica")])


def removed_member(t: WireTeam) -> Any:
    m = t.member("editor", "leaver")
    r = t.owner.post(f"/v1/spaces/{t.space}/members/{m.user_id}/remove", {})
    assert r.status_code == 200, r.text
    return m.get(_head(t))


def expired_invite(t: WireTeam) -> Any:
    code = t.owner.invite(t.space, "editor", ttl=60)
    hub, real = t.hub, t.hub.now
    hub.now = lambda: real() + 61_000
    try:
        return t.raw.post("/v1/invites/redeem", json={
            "code": code, "device_name": "late", "device_key": public_b64(new_private_key())})
    finally:
        hub.now = real


def _device_login(t: WireTeam) -> tuple[Any, dict[str, Any]]:
    key = new_private_key()
    r = t.raw.post("/v1/device/code", json={"device_name": "second",
                                            "device_key": public_b64(key)})
    assert r.status_code == 201, r.text
    return key, r.json()


def _device_token(t: WireTeam, key: Any, code: str) -> Any:
    return t.raw.post("/v1/token", json={
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": code},
        headers={"DPoP": make_proof(key, "POST", t.url + "/v1/token")})


def reused_device_code(t: WireTeam) -> Any:
    key, start = _device_login(t)
    assert t.editor.post("/v1/device/approve", {"user_code": start["user_code"]}).status_code \
        == 200
    first = _device_token(t, key, start["device_code"])
    assert first.status_code == 200, first.text
    return _device_token(t, key, start["device_code"])


def device_code_by_another_key(t: WireTeam) -> Any:
    _, start = _device_login(t)
    return _device_token(t, new_private_key(), start["device_code"])


def brute_forced_user_code(t: WireTeam) -> Any:
    m = t.member("viewer", "guesser")
    last = None
    for i in range(8):
        last = m.post("/v1/device/approve", {"user_code": f"BCDF-{i:04d}"})
        if last.status_code == 429:
            return last
    return last


def owner_code_redeemed_with_bearer_of_legacy_kind(t: WireTeam) -> Any:
    return t.raw.get("/v1/spaces", headers={"Authorization": "Bearer qd_forged"})


CASES: list[tuple[Callable[[WireTeam], Any], int, str, str | None]] = [
    (no_token, 401, "unauthorized", "no_token"),
    (bearer_scheme, 401, "unauthorized", "dpop_required"),
    (owner_code_redeemed_with_bearer_of_legacy_kind, 401, "unauthorized", "dpop_required"),
    (alg_none, 401, "unauthorized", "bad_alg"),
    (hs256_with_public_key, 401, "unauthorized", "bad_alg"),
    (signed_by_another_key, 401, "unauthorized", "bad_signature"),
    (tampered_claims, 401, "unauthorized", "bad_signature"),
    (unknown_kid, 401, "unauthorized", "unknown_kid"),
    (expired, 401, "unauthorized", "token_expired"),
    (not_yet_valid, 401, "unauthorized", "token_not_yet_valid"),
    (wrong_audience, 401, "unauthorized", "wrong_audience"),
    (missing_typ, 401, "unauthorized", "bad_typ"),
    (typ_plain_jwt, 401, "unauthorized", "bad_typ"),
    (token_bound_to_another_key, 401, "unauthorized", "dpop_key_mismatch"),
    (delegated_token_for_another_space, 404, "not_found", None),
    (dpop_missing, 401, "unauthorized", "dpop_missing"),
    (dpop_by_another_key, 401, "unauthorized", "dpop_key_mismatch"),
    (dpop_replayed_jti, 401, "unauthorized", "dpop_replayed"),
    (dpop_wrong_method, 401, "unauthorized", "dpop_wrong_method"),
    (dpop_wrong_url, 401, "unauthorized", "dpop_wrong_url"),
    (dpop_other_host, 401, "unauthorized", "dpop_wrong_url"),
    (dpop_stale_iat, 401, "unauthorized", "dpop_stale"),
    (dpop_future_iat, 401, "unauthorized", "dpop_stale"),
    (dpop_wrong_typ, 401, "unauthorized", "dpop_invalid"),
    (dpop_ath_of_another_token, 401, "unauthorized", "dpop_invalid"),
    (dpop_embeds_private_key, 401, "unauthorized", "dpop_invalid"),
    (refresh_without_proof, 401, "unauthorized", "dpop_missing"),
    (refresh_by_another_key, 401, "unauthorized", "dpop_key_mismatch"),
    (refresh_replayed_after_rotation, 401, "unauthorized", "refresh_reused"),
    (delegated_on_admin_endpoint, 403, "forbidden", "delegated"),
    (delegated_minting_a_delegation, 403, "forbidden", "delegated"),
    (delegated_read_token_publishing, 403, "forbidden", None),
    (revoked_delegation, 401, "unauthorized", "delegation_revoked"),
    (revoked_device, 401, "unauthorized", "device_revoked"),
    (deactivated_user, 401, "unauthorized", "user_inactive"),
    (revoked_replica, 403, "forbidden", "replica_revoked"),
    (removed_member, 404, "not_found", None),
    (expired_invite, 403, "forbidden", "invite_expired"),
    (reused_device_code, 401, "unauthorized", "code_used"),
    (device_code_by_another_key, 401, "unauthorized", "dpop_key_mismatch"),
    (brute_forced_user_code, 429, "rate_limited", None),
]


@pytest.mark.parametrize("case,status,code,reason", CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_credential_is_refused(team: WireTeam, case: Callable[[WireTeam], Any], status: int,
                                   code: str, reason: str | None) -> None:
    batches = team.counts()["batches"]
    r = case(team)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code, r.text
    if reason is not None:
        assert err["details"].get("reason") == reason, r.text
    assert team.counts()["batches"] == batches  # nothing published by any of them


def test_good_credentials_still_work_after_the_table(team: WireTeam) -> None:
    """The table revoked and rotated other members' credentials, never these."""
    assert team.editor.get(_head(team)).status_code == 200
    assert team.editor.publish(team.space, [put("page/still-fine")]).status_code == 201


def test_refresh_rotates_and_the_new_token_works(team: WireTeam) -> None:
    m = team.member("editor", "rotating")
    r = _refresh(team, m, m.refresh_token)
    assert r.status_code == 200, r.text
    grant = r.json()
    assert grant["refresh_token"] != m.refresh_token and grant["token_type"] == "DPoP"
    m.use_token(grant["access_token"])
    assert m.get(_head(team)).status_code == 200


def test_device_login_gives_a_second_device_of_the_same_member(team: WireTeam) -> None:
    key, start = _device_login(team)
    pending = _device_token(team, key, start["device_code"])
    assert pending.status_code == 400
    assert pending.json()["error"]["code"] == "authorization_pending"
    assert team.editor.post("/v1/device/approve",
                            {"user_code": start["user_code"].lower()}).status_code == 200
    r = _device_token(team, key, start["device_code"])
    assert r.status_code == 200, r.text
    second = redeem.__globals__["WireMember"](team.client, r.json()["access_token"], key,
                                          r.json()["user_id"], r.json()["device_id"])
    assert second.user_id == team.editor.user_id and second.device_id != team.editor.device_id
    assert second.publish(team.space, [put("page/from-second-device")]).status_code == 201
