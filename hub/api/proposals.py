"""HTTP for proposals (hub/proposals.py decides; docs/protocol.md, "Proposals").

    GET  /v1/spaces/{space}/proposals[?state=open|…|all]   list (agents: their own)
    POST /v1/spaces/{space}/proposals                      file (agents)
    GET  /v1/spaces/{space}/proposals/{proposal}           one, with the current entry, diff
    POST /v1/spaces/{space}/proposals/{proposal}/accept    publish it hub-attested (members)
    POST /v1/spaces/{space}/proposals/{proposal}/reject    {reason?} (members)
    POST /v1/spaces/{space}/proposals/{proposal}/withdraw  (the proposing agent)
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import proposals
from hub import screening as screen
from hub.api.http import JSON, hub_of, principal, read_json
from hub.api.routes import SMALL_BODY, fields
from shared.errors import InvalidRequest


async def list_proposals(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    unknown = set(request.query_params) - {"state"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    return JSON(await run_in_threadpool(proposals.list_proposals, hub.store, p,
                                        request.path_params["space"],
                                        request.query_params.get("state", "open")))


async def file_proposal(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    s = hub.settings
    body = await read_json(request, s.max_body_bytes, allowed=fields("proposal_file"),
                           nul=True)
    out = await run_in_threadpool(proposals.file, hub.store, p, request.path_params["space"],
                                  body, hub.now(), max_body=s.max_entry_body,
                                  screening=screen.config_for(s.screening_injection))
    return JSON(out, status_code=201)


async def show_proposal(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    return JSON(await run_in_threadpool(proposals.show, hub.store, p,
                                        request.path_params["space"],
                                        request.path_params["proposal"]))


async def accept_proposal(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    await read_json(request, SMALL_BODY, allowed=fields("empty"))
    out, outcome = await run_in_threadpool(
        proposals.accept, hub.store, hub.key, hub.settings, p, request.path_params["space"],
        request.path_params["proposal"], hub.now, hub.hooks)
    hub.published(outcome)  # in-process event streams (others heard the NOTIFY)
    return JSON(out)


async def reject_proposal(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body = await read_json(request, SMALL_BODY, allowed=fields("proposal_reject"))
    return JSON(await run_in_threadpool(proposals.reject, hub.store, p,
                                        request.path_params["space"],
                                        request.path_params["proposal"], body, hub.now()))


async def withdraw_proposal(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    await read_json(request, SMALL_BODY, allowed=fields("empty"))
    return JSON(await run_in_threadpool(proposals.withdraw, hub.store, p,
                                        request.path_params["space"],
                                        request.path_params["proposal"], hub.now()))


PROPOSAL_ROUTES = [
    Route("/v1/spaces/{space}/proposals", list_proposals, methods=["GET"]),
    Route("/v1/spaces/{space}/proposals", file_proposal, methods=["POST"]),
    Route("/v1/spaces/{space}/proposals/{proposal}", show_proposal, methods=["GET"]),
    Route("/v1/spaces/{space}/proposals/{proposal}/accept", accept_proposal,
          methods=["POST"]),
    Route("/v1/spaces/{space}/proposals/{proposal}/reject", reject_proposal,
          methods=["POST"]),
    Route("/v1/spaces/{space}/proposals/{proposal}/withdraw", withdraw_proposal,
          methods=["POST"]),
]
