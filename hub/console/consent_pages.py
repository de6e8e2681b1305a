"""The console's consent page for the remote MCP endpoint, and a member's list of the agents
they let in (docs/console.md, docs/agents.md "Remote endpoint").

    GET  /console/consent?request=ID   which client asks, the agent name it will act as,
                                       which scopes, which space (the member picks one they
                                       belong to, or the one the client named)
    POST /console/consent              approve (space, scopes) or deny ─► 303 to the client
    GET  /console/agents               the member's consents: client, agent, space, scopes
    POST /console/agents/revoke        revoke one: its tokens stop at the next call
    GET  /console/spaces/{s}/remote    whether remote agents may write without a proposal
    POST /console/spaces/{s}/remote    a space admin turns it on or off

The member signs in as for any console page; a browser without a session is told to sign
in and come back (the request waits ``oauth_request_ttl``). POSTs pass the Origin and CSRF
checks first (hub/console/http.py). The decisions are hub/oauth/consent.py's.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import spaces
from hub.api.http import hub_of
from hub.console import sessions
from hub.console.http import (
    call,
    checked_form,
    page,
    redirect,
    session_secret,
    signed_in,
    space_and_role,
)
from hub.oauth import consent
from hub.oauth.scopes import ACTIONS
from hub.remote_mcp import writes


async def _member(request: Request) -> Any:
    """The signed-in member, or None."""
    hub = hub_of(request)
    s = sessions.find(hub.store, session_secret(request), hub.now())
    if s is None or not s.signed_in:
        return None
    try:
        return await call(sessions.principal, hub.store, s, hub.now())
    except Exception:
        return None


async def consent_page(request: Request) -> Response:
    hub = hub_of(request)
    rid = request.query_params.get("request", "")
    p = await _member(request)
    if p is None:
        return page(request, "consent.html", signin=True, asked=None, me=None)

    @signed_in
    async def show(request: Request, p: Any) -> Response:
        asked = await call(consent.pending, hub.store, rid, hub.now())
        mine = (await call(spaces.list_spaces, hub.store, p))["spaces"]
        choices = [s for s in mine if asked["space"] in (None, s["name"])]
        return page(request, "consent.html", me=p, asked=asked, spaces=choices,
                    actions=ACTIONS, signin=False)

    return await show(request)


@signed_in
async def consent_post(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    rid = form.get("request", "")
    if form.get("decision") != "approve":
        return redirect(await call(consent.deny, hub.store, rid, hub.now()))
    actions = [a for a in ACTIONS if form.get(f"scope_{a}") == "on"]
    to = await call(consent.approve, hub.store, hub.settings, p, rid,
                    form.get("space", ""), actions, hub.now())
    return redirect(to)


@signed_in
async def agents_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    rows = await call(consent.list_consents, hub.store, p, hub.now())
    return page(request, "agents.html", me=p, consents=rows)


@signed_in
async def agents_revoke(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    await call(consent.revoke, hub.store, p, form.get("consent", ""), hub.now())
    return redirect("/console/agents")


@signed_in
async def remote_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    sp, role = await call(space_and_role, hub.store, p, request.path_params["space"])
    on = await call(writes.allowed, hub.store, sp["id"])
    return page(request, "remote.html", me=p, space=sp, role=role, on=on)


@signed_in
async def remote_post(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref = request.path_params["space"]
    await call(writes.set_allowed, hub.store, p, ref, form.get("remote_writes") == "on",
               hub.now())
    return redirect(f"/console/spaces/{ref}/remote")


ROUTES = [
    Route("/consent", consent_page, methods=["GET"]),
    Route("/consent", consent_post, methods=["POST"]),
    Route("/agents", agents_page, methods=["GET"]),
    Route("/agents/revoke", agents_revoke, methods=["POST"]),
    Route("/spaces/{space}/remote", remote_page, methods=["GET"]),
    Route("/spaces/{space}/remote", remote_post, methods=["POST"]),
]
