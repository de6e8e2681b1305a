"""The space log's endpoints (hub/spacelog.py; docs/security.md, "The log and its
witnesses"):

    GET  /v1/spaces/{space}/log/consistency?first=M&second=N   proof M → N, last leaf of N
    GET  /v1/spaces/{space}/log/inclusion?epoch=E&seq=S[&size=N]  the leaf of head (E, S)
    GET  /v1/spaces/{space}/witnesses                           the signed policies
    POST /v1/spaces/{space}/witnesses  {quorum, witnesses, reason?}   hub owners

Their OpenAPI operations are declared with the others (hub/api/openapi.py), the request
schema in shared/schemas.py.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import spacelog
from hub.api.http import JSON, hub_of, principal, read_json
from shared.errors import InvalidRequest
from shared.schemas import REQUESTS

BODY_LIMIT = 16 * 1024  # a policy of 16 witnesses is well under it


def _query(request: Request, allowed: set[str]) -> dict[str, str]:
    qp = request.query_params
    unknown = set(qp) - allowed
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    return {k: qp[k] for k in qp}


async def consistency(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    q = _query(request, {"first", "second"})
    return JSON(await run_in_threadpool(spacelog.consistency, hub.store, p,
                                        request.path_params["space"], q.get("first"),
                                        q.get("second")))


async def inclusion(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    q = _query(request, {"epoch", "seq", "size"})
    return JSON(await run_in_threadpool(spacelog.inclusion, hub.store, p,
                                        request.path_params["space"], q.get("epoch"),
                                        q.get("seq"), q.get("size")))


async def witnesses(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    return JSON(await run_in_threadpool(spacelog.witnesses, hub.store, p,
                                        request.path_params["space"]))


async def set_witnesses(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body: dict[str, Any] = await read_json(request, BODY_LIMIT,
                                           allowed=set(REQUESTS["witnesses_set"]["properties"]))
    return JSON(await run_in_threadpool(spacelog.set_witnesses, hub.store, hub.key, p,
                                        request.path_params["space"], body, hub.now()))


LOG_ROUTES = [
    Route("/v1/spaces/{space}/log/consistency", consistency, methods=["GET"]),
    Route("/v1/spaces/{space}/log/inclusion", inclusion, methods=["GET"]),
    Route("/v1/spaces/{space}/witnesses", witnesses, methods=["GET"]),
    Route("/v1/spaces/{space}/witnesses", set_witnesses, methods=["POST"]),
]
