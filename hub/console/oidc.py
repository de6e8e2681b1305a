"""Console sign-in through an OpenID Connect provider (authlib's Starlette client).

    start()   GET /console/signin/oidc
              authlib makes the authorization URL with a fresh state, nonce and PKCE
              verifier (S256); the hub keeps them in ``console_oidc_logins`` under the hash of
              a random flow secret that goes to the browser as a cookie (HttpOnly,
              SameSite=Lax: the provider's redirect back is a cross-site navigation, which
              a Strict cookie would not follow); the browser goes to the provider
    finish()  GET /console/signin/oidc/callback?code=&state=
              1. the cookie's row is taken (deleted: one use; none, or expired: refused)
              2. the state sent back equals the one kept for this browser (constant time)
              3. authlib redeems the code at the token endpoint with the PKCE verifier and
                 the client secret, and checks the ID token: signature by a key of the
                 provider's JWKS, ``iss`` = the configured issuer, ``aud`` holds our client
                 id, ``exp``/``iat``, ``nonce`` = the one kept for this browser
              4. ``email_verified`` is true and an active user has this email (set by the
                 hub operator: ``quire hub email``, stored lower-case)
              5. the account has sign-ins left (``device_codes_per_min``, per account)
              6. a member whose display name is still this machine's guess (an account or
                 device name: ``users.name_source`` ``guess``) takes the provider's
                 ``name`` claim, once (audited ``user.rename``); a name the member, an
                 admin or the invite gave is never replaced (docs/decisions.md D138)
              then a console session like the device path's (sessions.start_signed_in);
              any failure raises ``Refused`` and creates nothing

The provider's metadata is read once per hub process (``oidc_metadata_url``, default
``<issuer>/.well-known/openid-configuration``) and its ``issuer`` must equal ``oidc_issuer``.
The client secret comes from ``oidc_client_secret_file`` or ``QUIRE_HUB_OIDC_CLIENT_SECRET``
and is never logged or shown.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool

from hub import logs
from hub.access import secret_hash
from hub.console import sessions
from hub.settings import Settings
from hub.store import oidc_logins as sql

log = logging.getLogger("quire.hub")

FLOW_COOKIE = "quire_console_oidc"
FLOW_PREFIX = "qo_"
FLOW_TTL_S = 600  # seconds a browser may take at the provider
CALLBACK = "/console/signin/oidc/callback"


class Refused(Exception):
    """A sign-in that did not check out; ``reason`` is a short word for logs and tests."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def configured(settings: Settings) -> bool:
    return bool(settings.oidc_issuer and settings.oidc_client_id)


def provider_name(settings: Settings) -> str:
    return settings.oidc_name or settings.oidc_issuer


def redirect_uri(settings: Settings) -> str:
    """The URI to register at the provider."""
    return settings.url.rstrip("/") + CALLBACK


def client_secret(settings: Settings) -> str:
    if settings.oidc_client_secret_file:
        try:
            return Path(settings.oidc_client_secret_file).read_text().strip()
        except OSError as e:
            logs.event(log, "oidc_misconfigured", logging.ERROR, reason="secret_file",
                       path=settings.oidc_client_secret_file, error=type(e).__name__)
            raise Refused("misconfigured", "sign-in through the provider is not set up right "
                          "on this hub (its operator can see why in the hub's log)") from e
    return settings.oidc_client_secret


def _client(hub: Any, app_state: Any) -> Any:
    """The hub's authlib client (one per app; it caches the provider's metadata and keys)."""
    client = getattr(app_state, "oidc_client", None)
    if client is None:
        from authlib.integrations.starlette_client import OAuth

        s = hub.settings
        oauth = OAuth()
        client = oauth.register(
            "quire", client_id=s.oidc_client_id, client_secret=client_secret(s),
            server_metadata_url=(s.oidc_metadata_url or s.oidc_issuer.rstrip("/")
                                 + "/.well-known/openid-configuration"),
            client_kwargs={"scope": s.oidc_scopes, "code_challenge_method": "S256",
                           "timeout": 15})
        app_state.oidc_client = client
    return client


async def _metadata(client: Any, settings: Settings) -> dict[str, Any]:
    try:
        meta = await client.load_server_metadata()
    except Exception as e:  # unreachable provider, bad JSON: no sign-in, say so
        logs.event(log, "oidc_metadata_failed", logging.WARNING, error=type(e).__name__)
        raise Refused("provider_unavailable", "the sign-in provider could not be reached; "
                      "try again later or sign in with a signed-in device") from e
    if meta.get("issuer") != settings.oidc_issuer:
        # OIDC Discovery §4.3: a provider answering for another issuer is not ours
        raise Refused("issuer_mismatch", "the sign-in provider's metadata names another "
                      "issuer than the one this hub is configured with")
    return dict(meta)


async def start(hub: Any, app_state: Any) -> tuple[str, str]:
    """(flow secret for the cookie, the provider URL to send the browser to)."""
    client = _client(hub, app_state)
    await _metadata(client, hub.settings)
    uri = redirect_uri(hub.settings)
    rv = await client.create_authorization_url(uri)
    flow = FLOW_PREFIX + secrets.token_urlsafe(32)
    data = json.dumps({"state": rv["state"], "nonce": rv["nonce"],
                       "code_verifier": rv["code_verifier"], "redirect_uri": uri})
    now = hub.now()
    await run_in_threadpool(hub.store.run_write, lambda conn: sql.insert_txn(
        conn, id=secret_hash(flow), data=data, now=now, expires_at=now + FLOW_TTL_S * 1000))
    return flow, str(rv["url"])


def _take(hub: Any, flow: str | None) -> dict[str, Any]:
    if not flow or not flow.startswith(FLOW_PREFIX) or len(flow) > 100:
        raise Refused("no_flow", "this sign-in was not started in this browser (or its "
                      "cookie is gone); start again from the sign-in page")
    now = hub.now()
    data = hub.store.run_write(lambda conn: sql.take_txn(conn, secret_hash(flow), now))
    if data is None:
        raise Refused("flow_used", "this sign-in was already used or has expired; start again "
                      "from the sign-in page")
    return dict(json.loads(data))


async def _verified_claims(hub: Any, app_state: Any, kept: dict[str, Any], code: str
                           ) -> dict[str, Any]:
    """Redeem the code and check the ID token (step 3)."""
    s = hub.settings
    client = _client(hub, app_state)
    meta = await _metadata(client, s)
    try:
        token = await client.fetch_access_token(
            code=code, redirect_uri=kept["redirect_uri"], code_verifier=kept["code_verifier"])
        if "id_token" not in token:
            raise Refused("no_id_token", "the provider sent no ID token (is 'openid' among "
                          "oidc_scopes?)")
        claims = await client.parse_id_token(
            token, nonce=kept["nonce"],
            claims_options={"iss": {"essential": True, "values": [meta["issuer"]]},
                            "aud": {"essential": True, "values": [s.oidc_client_id]}})
        out = dict(claims)
        if ("email" not in out or "email_verified" not in out) and meta.get(
                "userinfo_endpoint"):
            # some providers say the email in the userinfo answer only; same subject required
            info = dict(await client.userinfo(token=token))
            if info.get("sub") == out.get("sub"):
                out.update({k: info[k] for k in ("email", "email_verified", "name")
                            if k in info and k not in out})
    except Refused:
        raise
    except Exception as e:  # authlib/joserfc/HTTP errors: the answer did not check out
        logs.event(log, "oidc_token_refused", logging.WARNING, error=type(e).__name__,
                   detail=str(getattr(e, "error", "") or getattr(e, "claim", "") or ""))
        raise Refused("bad_token", "the provider's answer did not check out (its ID token "
                      "was not for this hub, or the code was not valid); start again") from e
    return out


def _member(hub: Any, claims: dict[str, Any]) -> tuple[str, str]:
    """(user id, email) of the active user this verified email belongs to (step 4)."""
    email = claims.get("email")
    if not isinstance(email, str) or not email or len(email) > 320:
        raise Refused("no_email", "the provider did not say which email you signed in with "
                      "(is 'email' among oidc_scopes?)")
    email = email.strip().lower()
    if claims.get("email_verified") not in (True, "true"):
        raise Refused("email_unverified", f"the provider has not verified {email}; verify it "
                      "there, then sign in again")
    with hub.store.read() as conn:
        row = sql.user_by_email_txn(conn, email)
    if row is None or not row[2]:
        raise Refused("unknown_email", f"no member of this hub signs in as {email}; ask the "
                      "hub's operator to set it for your account (quire hub email)")
    return str(row[0]), email


def _take_name(hub: Any, user_id: str, claim: Any) -> None:
    """Step 6: the provider's ``name`` claim replaces a guessed display name (never one a
    person chose); a claim that is not a display name is ignored."""
    from hub import audit
    from hub.admin import check_display_name
    from hub.store.principals import replace_guessed_name_txn, user_name_txn
    from shared.errors import InvalidRequest

    try:
        name = check_display_name(claim)
    except InvalidRequest:
        return
    now = hub.now()

    def txn(conn: Any) -> None:
        known = user_name_txn(conn, user_id)
        if known is None or known[1] != "guess" or known[0] == name:
            return
        if replace_guessed_name_txn(conn, user_id, name, "oidc"):
            audit.record_hub_txn(conn, at=now, action="user.rename",
                                 actor={"user": user_id, "device": None, "agent": None},
                                 details={"user_id": user_id, "name": name,
                                          "previous": known[0], "via": "oidc"})

    hub.store.run_write(txn)


async def finish(hub: Any, app_state: Any, flow: str | None, params: Any) -> str:
    """Check a callback; the new console session's secret (for its cookie), or Refused."""
    kept = await run_in_threadpool(_take, hub, flow)
    if params.get("error"):
        raise Refused("provider_error", "the provider did not sign you in: "
                      f"{str(params.get('error'))[:100]}")
    state, code = params.get("state"), params.get("code")
    if not (isinstance(state, str) and hmac.compare_digest(state.encode(),
                                                           kept["state"].encode())):
        raise Refused("bad_state", "this answer from the provider does not belong to the "
                      "sign-in this browser started; start again")
    if not isinstance(code, str) or not code or len(code) > 2000:
        raise Refused("no_code", "the provider sent no authorization code; start again")
    claims = await _verified_claims(hub, app_state, kept, code)
    user_id, email = await run_in_threadpool(_member, hub, claims)
    # every sign-in makes a session and a browser device: limited per account too (the
    # start is limited per address), in the device-login bucket, keyed by the user
    ok, _wait = await run_in_threadpool(hub.login_limiter.allow, f"user:{user_id}")
    if not ok:
        raise Refused("rate_limited", "too many sign-ins for this account; wait a minute "
                                      "and retry")
    await run_in_threadpool(_take_name, hub, user_id, claims.get("name"))
    via = {"via": "oidc", "issuer": hub.settings.oidc_issuer, "email": email}
    return await run_in_threadpool(sessions.start_signed_in, hub.store, user_id, hub.now(),
                                   hub.settings.console_session_ttl, via)
