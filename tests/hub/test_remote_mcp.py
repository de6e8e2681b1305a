"""The hub's remote MCP endpoint (docs/agents.md, "Remote endpoint"), on the real hub app
served by uvicorn on loopback: an agent host discovers the authorization server, registers,
signs in with code + PKCE (S256) while a member consents in the console, then the official
``mcp`` client reads, searches and files a proposal over streamable HTTP. And the attacks:
a token for space A reading space B, a revoked consent, a wrong PKCE verifier, a reused code,
a redirect-uri mismatch, an expired token; every refusal structured."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
import uvicorn

from tests.kit.host import free_port
from tests.kit.hubproc import init_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import put, redeem

REDIRECT = "http://127.0.0.1:9/callback"
DOC = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()


class Clock:
    def __init__(self) -> None:
        self.skew = 0

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.skew


# PostgreSQL too with QUIRE_LONG_E2E=1 (the default run keeps within its time budget)
BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get("QUIRE_LONG_E2E") else [])


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[dict[str, Any]]:
    with contextlib.ExitStack() as stack:
        db = None
        if request.param == "postgresql":
            require_pg()
            db = stack.enter_context(pg_database())
        yield from _served(tmp_path_factory, db)


def _served(tmp_path_factory: pytest.TempPathFactory, db: str | None
            ) -> Iterator[dict[str, Any]]:
    from hub.app import create_app
    from hub.settings import load_settings

    data = tmp_path_factory.mktemp("remote") / "hub"
    code = init_hub(data, db)
    settings = load_settings(data)
    settings.port = free_port()
    clock = Clock()
    settings.clock = clock
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port,
                                           log_level="warning", lifespan="on"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and th.is_alive(), "hub did not start"
        time.sleep(0.05)
    url = settings.url
    web = httpx2.Client(base_url=url)
    owner = redeem(web, code, "owner-laptop")
    a, b = owner.create_space("alpha"), owner.create_space("beta")
    v = put("page/deploy", "Deploy with the blue button.\n", title="How we deploy")
    assert owner.publish(a, [v]).status_code == 201
    assert owner.publish(a, [put("guardrail/no-prod", "never touch prod\n", title="no prod",
                                 meta={"severity": "block"})]).status_code == 201
    assert owner.publish(b, [put("page/secret-b", "beta only\n")]).status_code == 201
    browser = sign_in(url, owner)
    editor = redeem(web, owner.invite(a, "editor"), "editor-laptop")
    yield {"url": url, "owner": owner, "browser": browser, "clock": clock, "deploy": v,
           "hub": app.state.hub, "editor": editor, "editor_browser": sign_in(url, editor)}
    server.should_exit = True
    th.join(10)


def sign_in(url: str, approver: Any) -> httpx2.Client:
    """A console browser session, approved by the owner's device (as today)."""
    b = httpx2.Client(base_url=url, headers={"Origin": url})
    r = b.post("/console/signin")
    assert r.status_code == 303, r.text
    wait = b.get("/console/signin/wait")
    code = re.search(r"quire devices approve ([A-Z0-9-]+)", wait.text)
    assert code, wait.text
    assert approver.post("/v1/device/approve", {"user_code": code.group(1)}).status_code == 200
    assert b.get("/console/signin/wait").status_code == 303
    return b


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()
                                         ).decode().rstrip("=")
    return verifier, challenge


def register(web: httpx2.Client) -> dict[str, Any]:
    """Discovery as an MCP host does it, then dynamic client registration."""
    r = web.post("/mcp", json={})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"
    prm_url = re.search(r'resource_metadata="([^"]+)"', r.headers["www-authenticate"]).group(1)
    prm = web.get(prm_url).json()
    assert prm["resource"].endswith("/mcp")
    issuer = prm["authorization_servers"][0].rstrip("/")
    u = urlsplit(issuer)
    meta = web.get(f"{u.scheme}://{u.netloc}/.well-known/oauth-authorization-server"
                   f"{u.path}").json()
    assert meta["code_challenge_methods_supported"] == ["S256"]
    reg = web.post(meta["registration_endpoint"], json={
        "client_name": "cloud agent", "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "client_secret_post",
        "grant_types": ["authorization_code", "refresh_token"]})
    assert reg.status_code == 201, reg.text
    # a public client whatever it asked: no client secret is issued, none kept
    assert reg.json()["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in reg.json()
    return {**reg.json(), "meta": meta}


def authorize(env: dict[str, Any], client: dict[str, Any], space: str,
              scope: str = "read propose") -> tuple[str, str]:
    """code + PKCE through the member's consent in the console: (code, verifier)."""
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(8)
    url = str(httpx2.URL(client["meta"]["authorization_endpoint"], params={
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
        "code_challenge": challenge, "code_challenge_method": "S256", "state": state,
        "scope": scope}))
    q = consent_in_browser(env, url, space, scope.split())
    assert q["state"] == [state]
    return q["code"][0], verifier


def token(env: dict[str, Any], client: dict[str, Any], code: str, verifier: str,
          redirect: str = REDIRECT) -> httpx2.Response:
    return httpx2.post(client["meta"]["token_endpoint"], data={
        "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
        "redirect_uri": redirect, "client_id": client["client_id"]})


async def tools(url: str, access: str, calls: list[tuple[str, dict[str, Any]]]
                ) -> list[dict[str, Any]]:
    """The official client over streamable HTTP: each call's JSON answer and isError."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {access}"}) as http, \
            streamable_http_client(url + "/mcp", http_client=http) as (read, write, *_), \
            ClientSession(read, write) as session:
        await session.initialize()
        for name, args in calls:
            res = await session.call_tool(name, args)
            out.append({"is_error": res.is_error, **json.loads(res.content[0].text)})
    return out


def signed_in_token(env: dict[str, Any], space: str = "alpha",
                    scope: str = "read propose") -> dict[str, Any]:
    web = httpx2.Client(base_url=env["url"])
    client = register(web)
    code, verifier = authorize(env, client, space, scope)
    r = token(env, client, code, verifier)
    assert r.status_code == 200, r.text
    return {**r.json(), "client": client}


def consent_in_browser(env: dict[str, Any], authorization_url: str, space: str,
                       scopes: list[str]) -> dict[str, list[str]]:
    """The member's part: the consent page, the choice, the redirect back (its query)."""
    browser = env["browser"]
    r = httpx2.get(authorization_url)
    assert r.status_code == 302, r.text
    consent = browser.get(r.headers["location"])
    assert consent.status_code == 200, consent.text
    assert "default-src 'none'" in consent.headers["content-security-policy"]
    assert "remote-cloud-agent" in consent.text and "<script" not in consent.text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', consent.text).group(1)
    rid = re.search(r'name="request" value="([^"]+)"', consent.text).group(1)
    done = browser.post("/console/consent", data={
        "csrf": csrf, "request": rid, "space": space, "decision": "approve",
        **{f"scope_{s}": "on" for s in scopes}})
    assert done.status_code == 303, done.text
    return parse_qs(urlsplit(done.headers["location"]).query)


def test_an_agent_host_signs_in_with_the_mcp_client_reads_searches_and_proposes(
        served: dict[str, Any]) -> None:
    """The official client does it all (RFC 9728 and 8414 discovery, registration, PKCE,
    the token exchange); the member consents in the console; then the tools."""
    from mcp import ClientSession
    from mcp.client.auth import OAuthClientProvider, TokenStorage
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    class Memory(TokenStorage):
        tokens: Any = None
        client: Any = None

        async def get_tokens(self) -> Any:
            return self.tokens

        async def set_tokens(self, tokens: Any) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> Any:
            return self.client

        async def set_client_info(self, client_info: Any) -> None:
            self.client = client_info

    back: dict[str, list[str]] = {}

    async def redirect(url: str) -> None:
        back.update(await asyncio.to_thread(consent_in_browser, served, url, "alpha",
                                            ["read", "propose"]))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=back["code"][0], state=back["state"][0])

    storage = Memory()
    v = served["deploy"].entry.version
    calls = [
        ("search", {"query": "blue"}),
        ("read", {"entry_id": "page/deploy"}),
        ("history", {"entry_id": "page/deploy"}),
        ("list_entries", {"kind": "page"}),
        ("bootstrap_world_model", {}),
        ("propose", {"entry_id": "page/deploy", "title": "How we deploy",
                     "body": "Deploy with the green button.\n", "base": v,
                     "reason": "the button is green now"}),
        ("read", {"entry_id": "page/nope"}),
        ("read", {"entry_id": "page/deploy", "bogus": 1}),
    ]

    async def run() -> list[dict[str, Any]]:
        auth = OAuthClientProvider(
            served["url"] + "/mcp", OAuthClientMetadata(
                client_name="cloud agent", redirect_uris=[REDIRECT],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"]),
            storage, redirect_handler=redirect, callback_handler=callback)
        out = []
        async with httpx2.AsyncClient(auth=auth) as http, \
                streamable_http_client(served["url"] + "/mcp", http_client=http) as (
                    read, write, *_), ClientSession(read, write) as session:
            await session.initialize()
            for name, args in calls:
                res = await session.call_tool(name, args)
                out.append({"is_error": res.is_error, **json.loads(res.content[0].text)})
        return out

    search, read, hist, lst, wm, prop, missing, bad = asyncio.run(run())
    assert storage.tokens.access_token.startswith("qoa_")
    assert storage.tokens.scope == "read propose"
    assert [r["id"] for r in search["results"]] == ["page/deploy"]
    assert read["body"] == "Deploy with the blue button.\n" and read["version"] == v
    people = served["owner"].get("/v1/spaces/alpha/people").json()["people"]
    owner_name = next(x["name"] for x in people if x["user_id"] == served["owner"].user_id)
    assert hist["versions"][0]["by"] == owner_name  # a name, never an id
    assert hist["versions"][0]["at"].endswith("+00:00")
    listed_ids = [e["id"] for e in lst["entries"]]  # other tests of the module add pages
    assert "page/deploy" in listed_ids and all(i.startswith("page/") for i in listed_ids)
    assert [g["key"] for g in wm["guardrails"]] == ["no-prod"]
    assert wm["space"]["name"] == "alpha"
    assert not prop["is_error"] and prop["proposal"]["state"] == "open", prop
    assert missing["is_error"] and missing["error"]["code"] == "not_found"
    assert bad["is_error"] and bad["error"]["code"] == "invalid_request"
    assert bad["error"]["details"]["fields"] == [{"field": "bogus",
                                                 "problem": "unknown argument"}]
    # the member sees the proposal, filed by the agent, in the console's list
    listed = served["owner"].get("/v1/spaces/alpha/proposals").json()
    assert [p["agent"] for p in listed["proposals"]] == ["remote-cloud-agent"], listed


def test_a_token_for_space_a_cannot_read_space_b(served: dict[str, Any]) -> None:
    t = signed_in_token(served, "alpha", "read")
    got = asyncio.run(tools(served["url"], t["access_token"], [
        ("bootstrap_world_model", {"space": "beta"}),
        ("search", {"query": "beta"}),
        ("propose", {"entry_id": "page/x", "body": "x", "reason": "r"}),
    ]))
    other, search, prop = got
    assert other["is_error"] and other["error"]["code"] == "space_not_found"
    assert other["error"]["details"]["candidates"] == [
        {"id": other["error"]["details"]["candidates"][0]["id"], "name": "alpha"}]
    assert search["results"] == []  # beta's page is never seen
    assert prop["is_error"] and prop["error"]["details"]["reason"] == "insufficient_scope"


def test_a_revoked_consent_stops_the_next_call(served: dict[str, Any]) -> None:
    t = signed_in_token(served)
    assert not asyncio.run(tools(served["url"], t["access_token"],
                                 [("search", {"query": "blue"})]))[0]["is_error"]
    b = served["browser"]
    page = b.get("/console/agents")
    assert page.status_code == 200 and "remote-cloud-agent" in page.text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
    ids = re.findall(r'name="consent" value="([^"]+)"', page.text)
    for cid in ids:  # without the CSRF token: nothing changes
        assert b.post("/console/agents/revoke", data={"consent": cid}).status_code == 403
    r = httpx2.post(served["url"] + "/mcp", json={}, headers={
        "Authorization": f"Bearer {t['access_token']}"})
    assert r.status_code != 401
    for cid in ids:
        assert b.post("/console/agents/revoke", data={"csrf": csrf, "consent": cid}
                      ).status_code == 303
    r = httpx2.post(served["url"] + "/mcp", json={}, headers={
        "Authorization": f"Bearer {t['access_token']}"})
    assert r.status_code == 401
    assert r.json()["error"]["details"]["reason"] == "consent_revoked"
    assert 'error="invalid_token"' in r.headers["www-authenticate"]
    # and the refresh token is dead too
    rr = httpx2.post(t["client"]["meta"]["token_endpoint"], data={
        "grant_type": "refresh_token", "refresh_token": t["refresh_token"],
        "client_id": t["client"]["client_id"]})
    assert rr.status_code == 400 and rr.json()["error"] == "invalid_grant"


def test_wrong_verifier_reused_code_and_redirect_mismatch_are_refused(
        served: dict[str, Any]) -> None:
    web = httpx2.Client(base_url=served["url"])
    client = register(web)
    code, verifier = authorize(served, client, "alpha")
    wrong = token(served, client, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    mismatch = token(served, client, code, verifier, redirect="http://127.0.0.1:9/other")
    assert mismatch.status_code == 400 and mismatch.json()["error"] == "invalid_request"
    ok = token(served, client, code, verifier)
    assert ok.status_code == 200, ok.text
    again = token(served, client, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    # the replayed code leaked: what it gave is revoked
    r = httpx2.post(served["url"] + "/mcp", json={}, headers={
        "Authorization": f"Bearer {ok.json()['access_token']}"})
    assert r.status_code == 401
    assert r.json()["error"]["details"]["reason"] in ("consent_revoked", "token_revoked")
    # ended as a member's revocation ends it: the delegation too, audited as a leak
    lines = [json.loads(x) for x in served["owner"].get(
        "/v1/audit", params={"space": "alpha"}).text.splitlines() if x.strip()]
    ended = [e for e in lines if e.get("action") == "oauth.consent_revoke"
             and e["details"].get("reason") == "leaked"]
    assert ended, [e.get("action") for e in lines]
    from sqlalchemy import text

    with served["hub"].store.read() as conn:
        revoked = conn.execute(text("SELECT revoked_at FROM delegations WHERE id = :d"),
                               {"d": ended[-1]["details"]["delegation"]}).scalar_one()
    assert revoked is not None
    # a plain method is not accepted: S256 only
    r = web.get(client["meta"]["authorization_endpoint"], params={
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
        "code_challenge": "x" * 43, "code_challenge_method": "plain"})
    assert r.status_code in (302, 400)
    if r.status_code == 302:
        assert "error=invalid_request" in r.headers["location"]


def test_consent_needs_the_member_csrf_and_a_safe_redirect(served: dict[str, Any]) -> None:
    web = httpx2.Client(base_url=served["url"])
    meta = register(web)["meta"]
    bad = web.post(meta["registration_endpoint"], json={
        "client_name": "phish", "redirect_uris": ["http://evil.example/cb"]})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_redirect_uri"
    client = register(web)
    verifier, challenge = pkce()
    r = web.get(meta["authorization_endpoint"], params={
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
        "code_challenge": challenge, "code_challenge_method": "S256"})
    page = served["browser"].get(r.headers["location"])
    rid = re.search(r'name="request" value="([^"]+)"', page.text).group(1)
    # no CSRF token, or a stranger's browser: no code
    forged = served["browser"].post("/console/consent", data={
        "request": rid, "space": "alpha", "decision": "approve", "scope_read": "on"})
    assert forged.status_code == 403 and "code=" not in forged.headers.get("location", "")
    stranger = httpx2.Client(base_url=served["url"], headers={"Origin": served["url"]})
    assert "Sign in first" in stranger.get(r.headers["location"]).text
    assert stranger.post("/console/consent", data={"request": rid, "space": "alpha",
                                                    "decision": "approve"}
                         ).status_code == 303  # to sign-in, nothing granted
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
    denied = served["browser"].post("/console/consent", data={
        "csrf": csrf, "request": rid, "decision": "deny"})
    assert "error=access_denied" in denied.headers["location"]


def test_an_expired_token_is_refused(served: dict[str, Any]) -> None:
    t = signed_in_token(served)
    served["clock"].skew += (served["hub"].settings.oauth_access_ttl + 1) * 1000
    try:
        r = httpx2.post(served["url"] + "/mcp", json={}, headers={
            "Authorization": f"Bearer {t['access_token']}"})
    finally:
        served["clock"].skew = 0
    assert r.status_code == 401
    assert r.json()["error"] == {"code": "unauthorized", "message": r.json()["error"]["message"],
                                 "details": {"reason": "token_expired"}}


def test_the_documented_remote_config_names_this_endpoint() -> None:
    m = re.search(r"```json\n(\{\s*\"mcpServers\":\s*\{\s*\"quire-remote\".*?)```", DOC, re.S)
    assert m, "docs/agents.md, Remote endpoint: the host configuration"
    server = json.loads(m.group(1))["mcpServers"]["quire-remote"]
    assert server["type"] == "http" and urlsplit(server["url"]).path == "/mcp"


def test_registrations_past_the_rate_limit_are_refused(served: dict[str, Any]) -> None:
    from hub.sharedlimits import limiter

    hub = served["hub"]
    kept = hub.oauth_limiter
    hub.oauth_limiter = limiter(None, "oauth", 0.001, 2, clock=hub.now)
    try:
        codes = [httpx2.post(served["url"] + "/oauth/register", json={
            "client_name": "flood", "redirect_uris": [REDIRECT]}).status_code
            for _ in range(3)]
        meta = httpx2.get(served["url"] + "/.well-known/oauth-authorization-server/oauth")
    finally:
        hub.oauth_limiter = kept
    assert codes == [201, 201, 429]
    assert meta.status_code == 200  # discovery is never limited


def test_remote_writes_only_where_the_space_allows_them_and_for_an_editor(
        served: dict[str, Any]) -> None:
    as_editor = dict(served, browser=served["editor_browser"])
    t = signed_in_token(as_editor, "alpha", "read propose write")
    assert t["scope"] == "read propose write"
    new = {"entry_id": "page/notes", "title": "Notes", "body": "remote notes\n"}
    off = asyncio.run(tools(served["url"], t["access_token"], [("write", new)]))[0]
    assert off["is_error"] and off["error"]["details"]["reason"] == "remote_writes_off"
    # a space admin allows remote writes (console: CSRF-checked form)
    b = served["browser"]
    page = b.get("/console/spaces/alpha/remote")
    assert "Remote writes are off" in page.text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
    assert b.post("/console/spaces/alpha/remote", data={"remote_writes": "on"}
                  ).status_code == 403  # no CSRF token: nothing changes
    assert "Remote writes are off" in b.get("/console/spaces/alpha/remote").text
    assert b.post("/console/spaces/alpha/remote", data={"csrf": csrf, "remote_writes": "on"}
                  ).status_code == 303
    # an editor cannot turn it on (admins only)
    eb = served["editor_browser"]
    ecsrf = re.search(r'name="csrf" value="([0-9a-f]+)"',
                      eb.get("/console/agents").text)
    assert eb.post("/console/spaces/alpha/remote", data={
        "csrf": ecsrf.group(1) if ecsrf else "", "remote_writes": ""}).status_code == 403
    wrote, hist = asyncio.run(tools(served["url"], t["access_token"], [
        ("write", new), ("history", {"entry_id": "page/notes"})]))
    assert not wrote["is_error"] and wrote["published"], wrote
    people = served["owner"].get("/v1/spaces/alpha/people").json()["people"]
    editor_name = next(x["name"] for x in people if x["user_id"] == served["editor"].user_id)
    assert hist["versions"][0]["by"] == editor_name
    assert hist["versions"][0]["agent"] == "remote-cloud-agent"
    # the audit names the agent and the member who approved it (their consent)
    lines = [json.loads(x) for x in served["owner"].get(
        "/v1/audit", params={"space": "alpha"}).text.splitlines() if x.strip()]
    pub = [e for e in lines if e.get("action") == "publish"][-1]
    assert pub["actor"]["attested"]["agent"] == "remote-cloud-agent"
    assert pub["actor"]["attested"]["approved_by"] == served["editor"].user_id
    # the owner's agent writes with an editor's rights, never the owner's: lowering the
    # guardrail (which the owner may do) is refused, a page is published
    mine = signed_in_token(served, "alpha", "read propose write")
    got = asyncio.run(tools(served["url"], mine["access_token"], [
        ("read", {"entry_id": "guardrail/no-prod"})]))[0]
    lower = {"entry_id": "guardrail/no-prod", "title": "no prod", "body": "never touch prod\n",
             "meta": {"severity": "info"}, "base": got["version"]}
    weak, page = asyncio.run(tools(served["url"], mine["access_token"], [
        ("write", lower), ("write", dict(new, entry_id="page/owner-agent"))]))
    assert weak["is_error"] and weak["error"]["code"] in ("policy_denied", "forbidden"), weak
    assert not page["is_error"] and page["published"], page
    # a token without the write scope
    ro = signed_in_token(as_editor, "alpha", "read propose")
    denied = asyncio.run(tools(served["url"], ro["access_token"], [("write", new)]))[0]
    assert denied["error"]["details"]["reason"] == "insufficient_scope"


def test_the_world_model_shows_a_guardrail_kept_by_front_matter_in_any_folder(
        served: dict[str, Any]) -> None:
    """A guardrail is a guardrail by its ``kind:`` wherever it lives (D139): a remote agent's
    world model must show one in ``Ops/`` (listing ``guardrail/`` alone missed it)."""
    owner = served["owner"]
    g = put("Ops/No Friday", "no deploys on a Friday\n", title="No Friday",
            meta={"kind": "guardrail", "severity": "block"})
    assert owner.publish("beta", [g]).status_code == 201
    t = signed_in_token(served, "beta", "read")
    wm = asyncio.run(tools(served["url"], t["access_token"], [
        ("bootstrap_world_model", {})]))[0]
    assert not wm["is_error"], wm
    # The module's hub is shared: another test may have kept a guardrail of its own here.
    assert "Ops/No Friday" in [x["id"] for x in wm["guardrails"]], wm["guardrails"]


def test_the_world_model_finds_skills_and_guardrails_by_the_spaces_folder_mapping(
        served: dict[str, Any]) -> None:
    """Under a mapping (D152) ``Playbooks/`` holds skills and ``Team Rules/`` guardrails: a
    remote agent's world model shows both (listing ``skill/`` and judging ``guardrail/``
    by the default layout missed them)."""
    owner = served["owner"]
    r = owner.post("/v1/spaces/beta/kinds", {"kinds": {"Playbooks": "skill",
                                                       "Team Rules": "guardrail"}})
    assert r.status_code == 200, r.text
    assert owner.publish("beta", [
        put("Playbooks/Triage", "sort the queue by severity\n", title="Triage"),
        put("Team Rules/Freeze", "no merges during the freeze\n", title="Freeze",
            meta={"severity": "block"})]).status_code == 201
    t = signed_in_token(served, "beta", "read")
    wm = asyncio.run(tools(served["url"], t["access_token"], [
        ("bootstrap_world_model", {})]))[0]
    assert not wm["is_error"], wm
    assert "Team Rules/Freeze" in [x["id"] for x in wm["guardrails"]], wm["guardrails"]
    assert "Playbooks/Triage" in json.dumps(wm["skills"]), wm["skills"]


def test_a_remote_agent_proposing_past_the_publication_limit_is_refused(
        served: dict[str, Any]) -> None:
    """Proposals and writes take the publication limit's tokens for the consent's device,
    as a device's pushes do: without it a remote agent could file and withdraw without
    bound."""
    from hub.ratelimit import RateLimiter

    hub = served["hub"]
    kept = hub.publish_limiter
    frozen = hub.now()
    hub.publish_limiter = RateLimiter(1 / 60, 1, clock=lambda: frozen)  # one, then none
    try:
        t = signed_in_token(served, "beta", "read propose")  # alpha's proposals: listed
        ask = {"entry_id": "page/limit", "title": "x", "body": "x\n", "reason": "why"}
        first, second = asyncio.run(tools(served["url"], t["access_token"], [
            ("propose", ask), ("propose", dict(ask, entry_id="page/limit2"))]))
    finally:
        hub.publish_limiter = kept
    assert not first["is_error"], first
    assert second["is_error"] and second["error"]["code"] == "rate_limited", second
