"""How hub/app.py serves the remote endpoint: ``/mcp`` and the OAuth routes, or nothing
when ``remote_mcp`` is off or the hub's URL cannot carry OAuth (plain http off loopback).

Every OAuth request that writes a row (register, authorize, token, revoke) takes a token of
``hub.oauth_limiter`` per client address first (``oauth_requests_per_min``): without it
anyone could fill the database with clients and pending requests."""

from __future__ import annotations

import logging
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from hub import logs
from hub.api.http import client_addr
from hub.oauth.provider import QuireProvider
from hub.oauth.routes import RESOURCE_PATH, oauth_routes, served
from hub.remote_mcp.server import Endpoint
from hub.sharedlimits import limiter

log = logging.getLogger("quire.hub")


def remote_endpoint(hub: Any) -> Endpoint | None:
    s = hub.settings
    if not s.remote_mcp:
        return None
    if not served(s.url):
        logs.event(log, "remote_mcp_off", logging.INFO, url=s.url,
                   reason="OAuth needs an https public_url (or http on a loopback address)")
        return None
    per_min = max(1, s.oauth_requests_per_min)
    hub.oauth_limiter = limiter(hub.shared, "oauth", per_min / 60, per_min, clock=hub.now)
    return Endpoint(hub)


class Limited:
    """The OAuth routes behind the per-address limiter (GETs of metadata are free)."""

    def __init__(self, app: ASGIApp, hub: Any):
        self.app, self.hub = app, hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (scope["method"] == "POST"
                                        or scope["path"].endswith("/authorize")):
            lim = self.hub.oauth_limiter
            key = client_addr(Request(scope))
            ok, wait = (await run_in_threadpool(lim.allow, key)
                        if getattr(lim, "blocking", False) else lim.allow(key))
            if not ok:
                await JSONResponse({"error": {
                    "code": "rate_limited", "message": "too many sign-in requests; wait "
                    "and retry", "details": {"retry_after": wait}}}, status_code=429,
                    headers={"Retry-After": str(wait)})(scope, receive, send)
                return
        await self.app(scope, receive, send)


def remote_routes(hub: Any, endpoint: Endpoint) -> list[BaseRoute]:
    provider = QuireProvider(hub.store, hub.settings, lambda: hub.now())
    out: list[BaseRoute] = []
    for r in oauth_routes(provider, hub.settings.url):
        if isinstance(r, Mount):  # /oauth: register, authorize, token, revoke
            r = Mount(r.path, app=Limited(r.app, hub))
        out.append(r)
    return [*out, Route(RESOURCE_PATH, endpoint)]
