"""The console's read-scope page (docs/console.md, "Administration"; decisions.md D151): what
each member may read, and what one member, or their agent, may read in detail. The same
functions as ``quire admin scope show`` and ``GET …/scope`` (hub/scope.py), so the three
never disagree.

    GET /console/admin/spaces/{s}/scope                 every member: the read rules that
                                                        apply, live entries readable/hidden
    GET /console/admin/spaces/{s}/scope?user=U[&agent=A]  that member (or their agent A):
                                                        the rules, counts, entry names
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import admin
from hub import scope as scopes
from hub.api.http import hub_of
from hub.console.http import call, page, signed_in, space_of
from shared.errors import InvalidRequest


@signed_in
async def scope_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    every = await call(scopes.every_scope, hub.store, p, ref)
    qp = request.query_params
    user = qp.get("user") or ""
    agent = (qp.get("agent") or "").strip() or None
    detail = None
    if user:
        if agent is not None and not admin.AGENT.match(agent):
            raise InvalidRequest("agent must be 1-64 of letters, digits, '_.@:-'")
        detail = await call(scopes.show_scope, hub.store, p, ref,
                            f"agent:{agent}" if agent else user, user)
    return page(request, "scope.html", me=p, space=sp, role=role, scopes=every["scopes"],
                detail=detail, qp=dict(qp))


ROUTES = [Route("/spaces/{space}/scope", scope_page, methods=["GET"])]
