"""OpenID Connect sign-in on the real hub app (in-process), against a real provider built
from authlib's server components (tests/hub/console/oidc_provider.py) that the hub reaches over
loopback HTTP.

A member whose verified email the operator set (``quire hub email``) signs in and gets the
same kind of console session as by device approval. Refused, creating nothing: an unverified
email, an email no member has, a callback whose state was forged or already used, a callback
replayed in a browser that did not start the sign-in, and ID tokens from another issuer,
for another audience or signed by another key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from joserfc.jwk import RSAKey

from hub.console import oidc
from tests.hub.console.oidc_provider import Provider, User
from tests.kit.wire import ndjson, redeem

CLIENT_ID = "quire-console"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    p = Provider(CLIENT_ID, "test-client-secret-0123456789").start()
    try:
        yield p
    finally:
        p.stop()


def _email(h: dict[str, Any], user: str, email: str) -> None:
    """The operator's command, as docs/operations.md shows it."""
    from hub.cli import main

    s = h["settings"]
    argv = ["email", user, email, "--data", str(s.data_dir), "--json"]
    if s.db_url:
        argv += ["--db", s.db_url]
    assert main(argv) == 0


@pytest.fixture
def hub(hub_app: dict[str, Any], provider: Provider, tmp_path: Path) -> dict[str, Any]:
    s = hub_app["settings"]
    secret = tmp_path / "oidc-client-secret"
    secret.write_text(provider.client.client_secret + "\n")
    s.oidc_issuer, s.oidc_client_id = provider.issuer, CLIENT_ID
    s.oidc_client_secret_file, s.oidc_name = str(secret), "Test IdP"
    provider.client.redirect_uris = [oidc.redirect_uri(s)]
    provider.claims, provider.signing_key = {}, provider.key
    provider.email_in_id_token = True
    owner = redeem(hub_app["client"], hub_app["code"], "owner-laptop")
    owner.create_space("team")
    _email(hub_app, owner.user_id, "Ada@Example.com")
    return {**hub_app, "owner": owner, "provider": provider}


def _browser(h: dict[str, Any]) -> Any:
    from starlette.testclient import TestClient

    return TestClient(h["app"], base_url=h["settings"].url.rstrip("/"))


def _to_provider(browser: Any, h: dict[str, Any], user: User | None) -> str:
    """Start at the hub, sign in at the provider: the callback URL the provider sends back."""
    r = browser.get("/console/signin/oidc", follow_redirects=False)
    assert r.status_code == 302, r.text
    loc = r.headers["location"]
    q = parse_qs(urlsplit(loc).query)
    assert loc.startswith(h["provider"].issuer + "/authorize?")
    assert q["code_challenge_method"] == ["S256"] and q["nonce"] and q["state"]
    assert "samesite=lax" in r.headers["set-cookie"].lower()
    h["provider"].user = user
    r = httpx2.get(loc, follow_redirects=False)
    assert r.status_code == 302, r.text
    cb = r.headers["location"]
    assert cb.startswith(oidc.redirect_uri(h["settings"]) + "?"), cb
    return cb


def _callback(browser: Any, cb: str) -> Any:
    p = urlsplit(cb)
    return browser.get(f"{p.path}?{p.query}", follow_redirects=False)


def _count(h: dict[str, Any], table: str) -> int:
    with h["hub"].store.read() as conn:
        from sqlalchemy import text
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def _signed_in(browser: Any) -> bool:
    r = browser.get("/console/spaces", follow_redirects=False)
    return r.status_code == 200 and ">team<" in r.text


ADA = User("ada-sub", "ada@example.com")


def test_a_member_with_a_verified_email_signs_in(hub: dict[str, Any]) -> None:
    s = hub["settings"]
    s.oidc_client_secret = "inline-secret-never-shown"
    assert "inline-secret-never-shown" not in repr(s)
    s.oidc_client_secret = ""
    page = _browser(hub).get("/console/signin").text
    assert 'href="/console/signin/oidc"' in page and "Sign in with Test IdP" in page
    b = _browser(hub)
    r = _callback(b, _to_provider(b, hub, ADA))
    assert r.status_code == 200 and 'http-equiv="refresh"' in r.text, r.text
    cookie = r.headers.get_list("set-cookie")
    session = next(c for c in cookie if c.startswith("quire_console="))
    assert "httponly" in session.lower()
    assert "samesite=strict" in session.lower() and "path=/console" in session.lower()
    assert _signed_in(b)
    # a provider that says the email in its userinfo answer only: asked there
    hub["provider"].email_in_id_token = False
    try:
        b2 = _browser(hub)
        assert _callback(b2, _to_provider(b2, hub, ADA)).status_code == 200 and _signed_in(b2)
    finally:
        hub["provider"].email_in_id_token = True
    # the same kind of session as by device approval: a browser device of the owner, which
    # sign-out revokes with the session (the old cookie is then refused)
    devices = b.get("/console/devices").text
    assert "console (browser)" in devices
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', devices).group(1)  # type: ignore
    stolen = b.cookies.get("quire_console")
    r = b.post("/console/signout", data={"csrf": csrf},
               headers={"Origin": hub["settings"].url.rstrip("/")}, follow_redirects=False)
    assert r.status_code == 303
    thief = _browser(hub)
    thief.cookies.set("quire_console", stolen)
    assert not _signed_in(thief)


def test_sign_ins_that_do_not_check_out_are_refused_and_create_nothing(
        hub: dict[str, Any]) -> None:
    prov: Provider = hub["provider"]
    before = (_count(hub, "console_sessions"), _count(hub, "devices"))

    # a client secret file the hub cannot read: refused at the start, the path logged
    s = hub["settings"]
    good, s.oidc_client_secret_file = s.oidc_client_secret_file, "/nonexistent/oidc-secret"
    r = _browser(hub).get("/console/signin/oidc", follow_redirects=False)
    s.oidc_client_secret_file = good
    assert r.status_code == 403 and "not set up right" in r.text

    def refused(r: Any, reason: str, b: Any) -> None:
        assert r.status_code == 403 and "Sign-in refused" in r.text, r.text
        assert (_count(hub, "console_sessions"), _count(hub, "devices")) == before, reason
        assert not _signed_in(b)

    # the provider has not verified the email
    b = _browser(hub)
    r = _callback(b, _to_provider(b, hub, User("ada-sub", "ada@example.com", False)))
    refused(r, "email_unverified", b)
    assert "has not verified ada@example.com" in r.text

    # a verified email no member has
    b = _browser(hub)
    r = _callback(b, _to_provider(b, hub, User("eve-sub", "eve@example.com")))
    refused(r, "unknown_email", b)
    assert "no member of this hub signs in as eve@example.com" in r.text

    # a forged state: the code is good, the state is not the one this browser was given
    b = _browser(hub)
    cb = _to_provider(b, hub, ADA)
    r = _callback(b, re.sub(r"state=[^&]+", "state=forged", cb))
    refused(r, "bad_state", b)
    assert "does not belong to the sign-in this browser started" in r.text

    # login CSRF: the victim's browser started a sign-in; an attacker makes it load the
    # callback of a sign-in the attacker started (their code, their state)
    victim, attacker = _browser(hub), _browser(hub)
    _to_provider(victim, hub, ADA)
    r = _callback(victim, _to_provider(attacker, hub, ADA))
    refused(r, "bad_state (login CSRF)", victim)

    # a callback replayed: before it was used, in a browser that did not start the sign-in
    # (a stolen callback URL); after it signed in, with a copy of the starting browser's
    # cookie (the hub takes a sign-in once, whatever the provider does with a used code)
    b = _browser(hub)
    cb = _to_provider(b, hub, ADA)
    flow = b.cookies.get(oidc.FLOW_COOKIE)
    thief = _browser(hub)
    r = _callback(thief, cb)
    refused(r, "no_flow", thief)
    assert "not started in this browser" in r.text
    r = _callback(b, cb)
    assert r.status_code == 200 and _signed_in(b)
    before = (_count(hub, "console_sessions"), _count(hub, "devices"))
    copy = _browser(hub)
    copy.cookies.set(oidc.FLOW_COOKIE, flow, path="/console/signin/oidc")
    r = _callback(copy, cb)
    refused(r, "flow_used", copy)
    assert "already used or has expired" in r.text

    # ID tokens that are not for this hub: another issuer, another audience (with azp naming
    # us, which authlib alone accepts), a signature by a key not in the provider's JWKS
    for claims, key in (({"iss": "http://127.0.0.1:1/other-issuer"}, None),
                        ({"aud": ["another-app"], "azp": CLIENT_ID}, None),
                        ({}, RSAKey.generate_key(2048, parameters={"kid": "test-1"}))):
        b = _browser(hub)
        prov.claims, prov.signing_key = claims, key or prov.key
        try:
            r = _callback(b, _to_provider(b, hub, ADA))
        finally:
            prov.claims, prov.signing_key = {}, prov.key
        refused(r, str(claims), b)
        assert "did not check out" in r.text


def test_sign_ins_are_limited_per_account_from_any_address(hub: dict[str, Any]) -> None:
    """Each sign-in makes a session and a browser device of the account: past the limit,
    one account is refused from every address (before, only per address: a new address,
    a new device). Addresses on the loopback range, in-process: no traffic anywhere."""
    from starlette.testclient import TestClient

    from hub.ratelimit import RateLimiter

    limit = hub["settings"].device_codes_per_min
    # the bucket refills with the hub's clock: held still, so a slow machine (this loop
    # took over 5 s under load) cannot earn a token back mid-test
    frozen = hub["hub"].now()
    hub["hub"].login_limiter = RateLimiter(limit / 60, limit, clock=lambda: frozen)
    devices = _count(hub, "devices")
    ok = []
    for i in range(limit + 2):
        b = TestClient(hub["app"], base_url=hub["settings"].url.rstrip("/"),
                       client=(f"127.0.1.{i + 1}", 50000))
        r = _callback(b, _to_provider(b, hub, ADA))
        ok.append(r.status_code == 200 and _signed_in(b))
    assert ok == [True] * limit + [False, False], ok
    assert _count(hub, "devices") == devices + limit  # a refused sign-in makes no device


def _name(h: dict[str, Any], user_id: str) -> tuple[str, str | None]:
    from sqlalchemy import text

    with h["hub"].store.read() as conn:
        row = conn.execute(text("SELECT name, name_source FROM users WHERE id = :id"),
                           {"id": user_id}).one()
    return str(row[0]), row[1]


def test_a_first_sign_in_names_a_member_who_never_chose_a_name(hub: dict[str, Any]) -> None:
    """The owner joined without a name (the hub took the device name: a guess): the
    provider's ``name`` claim replaces it at the first sign-in, once. A member who chose a
    name at join keeps it whatever the provider says (docs/decisions.md D138)."""
    prov: Provider = hub["provider"]
    owner = hub["owner"]
    assert _name(hub, owner.user_id) == ("owner-laptop", "guess")
    grace_code = owner.invite("team", "editor")
    r = hub["client"].post("/v1/invites/redeem", json={
        "code": grace_code, "device_name": "grace-pc", "user_name": "Grace H.",
        "device_key": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})
    assert r.status_code == 201 and r.json()["name_source"] == "member", r.text
    grace = r.json()["user_id"]
    _email(hub, grace, "grace@example.com")
    try:
        prov.claims = {"name": "Ada Lovelace"}
        b = _browser(hub)
        assert _callback(b, _to_provider(b, hub, ADA)).status_code == 200 and _signed_in(b)
        assert _name(hub, owner.user_id) == ("Ada Lovelace", "oidc")
        prov.claims = {"name": "Countess of Lovelace"}  # a later sign-in changes nothing
        b = _browser(hub)
        assert _callback(b, _to_provider(b, hub, ADA)).status_code == 200
        assert _name(hub, owner.user_id) == ("Ada Lovelace", "oidc")
        prov.claims = {"name": "Someone Else"}
        b = _browser(hub)
        r = _callback(b, _to_provider(b, hub, User("grace-sub", "grace@example.com")))
        assert r.status_code == 200
        assert _name(hub, grace) == ("Grace H.", "member")
    finally:
        prov.claims = {}
    audit = owner.get("/v1/audit").text
    renames = [e for e in ndjson(audit) if e.get("action") == "user.rename"]
    assert [(e["details"]["previous"], e["details"]["name"]) for e in renames] == [
        ("owner-laptop", "Ada Lovelace")]
