"""The console's proposals pages (docs/console.md, "Proposals"): what agents proposed in a
space, the change against the entry as it is now, and the accept and reject buttons.

    GET  /console/spaces/{s}/proposals[?state=…]        hub/proposals.list_proposals
    GET  /console/spaces/{s}/proposals/{id}             hub/proposals.show (the diff)
    POST /console/spaces/{s}/proposals/{id}/decide      decision=accept: hub/proposals.accept
                                                        (published hub-attested with this
                                                        member's rights); decision=reject
                                                        with a reason: hub/proposals.reject

The same domain functions as the API with the browser's ``Principal`` (same checks, same
audit); the POST passes the Origin and CSRF checks first and ends in a redirect to the
proposal with a confirmation banner (``?done=``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import proposals
from hub.api.http import hub_of
from hub.console.http import call, checked_form, page, redirect, signed_in, space_of
from shared.errors import InvalidRequest

BANNERS = {"accepted": "Accepted: the change is published, with the agent and you in the "
                       "audit.",
           "rejected": "Rejected: the agent's member sees why; nothing was published."}


@signed_in
async def proposals_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    state = request.query_params.get("state", "open")
    out = await call(proposals.list_proposals, hub.store, p, ref,
                     state if state in (*proposals.STATES, "all") else "open")
    return page(request, "proposals.html", me=p, space=sp, role=role,
                proposals=out["proposals"], state=state,
                choices=(*proposals.STATES, "all"))


@signed_in
async def proposal_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    out = await call(proposals.show, hub.store, p, ref, request.path_params["proposal"])
    return page(request, "proposal.html", me=p, space=sp, role=role, p_=out["proposal"],
                current=out["current"], moved=out["moved"], diff=out["diff"],
                diff_complete=out["diff_complete"],
                banner=BANNERS.get(request.query_params.get("done", "")),
                action=request.url.path.rstrip("/") + "/decide")


@signed_in
async def decide(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, _sp, _role = await space_of(request, p)
    pid = request.path_params["proposal"]
    decision = form.get("decision")
    if decision == "accept":
        _out, outcome = await call(proposals.accept, hub.store, hub.key, hub.settings, p, ref,
                                   pid, hub.now, hub.hooks)
        hub.published(outcome)
    elif decision == "reject":
        await call(proposals.reject, hub.store, p, ref, pid,
                   {"reason": form.get("reason", "").strip() or None}, hub.now())
    else:
        raise InvalidRequest("decision must be accept or reject")
    done = "accepted" if decision == "accept" else "rejected"
    return redirect(f"/console/spaces/{quote(ref, safe='')}/proposals/{quote(pid, safe='')}"
                    f"?done={done}")


# relative to /console: hub/app.py mounts them before the pages of hub/console/pages.py
ROUTES = [
    Route("/spaces/{space}/proposals", proposals_page, methods=["GET"]),
    Route("/spaces/{space}/proposals/{proposal}", proposal_page, methods=["GET"]),
    Route("/spaces/{space}/proposals/{proposal}/decide", decide, methods=["POST"]),
]
