"""The folder proof endpoint (hub/completeness.py; docs/protocol.md, "Folder proofs"):

    GET /v1/spaces/{space}/proof?scope=PATTERN[&scope=PATTERN…][&nonce=N]
        → {head: the signed head (its ``tree``), proof: shared/folderproof.py}
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import completeness
from hub.api.http import JSON, checked_nonce, hub_of, principal
from hub.api.openapi import OPS, Op
from shared.errors import InvalidRequest

OPS.update({
    ("GET", "/v1/spaces/{space}/proof"): Op(
        "a completeness proof for folder scopes (FOLDER/*: it and all under it) at the current head, "
        "with the signed head whose tree root it ends at",
        query=(("scope", {"type": "string"}), ("nonce", {"type": "string"}))),
})


async def proof(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    qp = request.query_params
    if set(qp) - {"scope", "nonce"}:
        raise InvalidRequest("the proof takes scope (repeated) and nonce only")
    nonce = qp.get("nonce")
    return JSON(await run_in_threadpool(
        completeness.proof, hub.store, hub.key, p, request.path_params["space"],
        qp.getlist("scope"), hub.now(), None if nonce is None else checked_nonce(nonce),
        hub.settings.state_root))


PROOF_ROUTES = [Route("/v1/spaces/{space}/proof", proof, methods=["GET"])]
