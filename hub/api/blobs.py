"""Handlers of the blob endpoints (hub/blobs.py decides): an attachment's bytes in and out.

    PUT /v1/spaces/{space}/blobs/{sha256}   raw bytes in; 201 stored, 200 held already
    GET /v1/spaces/{space}/blobs/{sha256}   raw bytes out, as a download: ``?name=`` gives
        the file name (``Content-Disposition``) and the media type by its extension
        (shared/attachments.py); ``nosniff`` and a sandboxing CSP whatever the type
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import blobs
from hub.api.http import JSON, hub_of, principal, read_bytes
from hub.quotas import HubQuotas
from shared.attachments import OCTET_STREAM, content_disposition, media_type_of

# a blob is never a page of this origin: no script, no plugin, no sniffing, no framing
DOWNLOAD_HEADERS = {"X-Content-Type-Options": "nosniff",
                    "Content-Security-Policy": "default-src 'none'; sandbox",
                    "Cache-Control": "private, max-age=0, no-cache",
                    "Cross-Origin-Resource-Policy": "same-origin"}


async def put_blob(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    space, sha = request.path_params["space"], request.path_params["sha256"]
    quotas = HubQuotas.from_settings(hub.settings)

    limit = await run_in_threadpool(blobs.upload_limit, hub.store, space,
                                    quotas.max_attachment_bytes)
    data = await read_bytes(request, limit)
    out = await run_in_threadpool(blobs.put_blob, hub.store, quotas, p, space, sha, data,
                                  hub.now())
    return JSON(out, status_code=201 if out["stored"] else 200)


async def get_blob(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    data = await run_in_threadpool(blobs.get_blob, hub.store, p,
                                   request.path_params["space"],
                                   request.path_params["sha256"])
    name = request.query_params.get("name", "")[:255]
    headers = dict(DOWNLOAD_HEADERS)
    headers["Content-Disposition"] = content_disposition(
        name.rsplit("/", 1)[-1] or request.path_params["sha256"])
    return Response(data, media_type=media_type_of(name) if name else OCTET_STREAM,
                    headers=headers)


BLOB_ROUTES = [
    Route("/v1/spaces/{space}/blobs/{sha256}", put_blob, methods=["PUT"]),
    Route("/v1/spaces/{space}/blobs/{sha256}", get_blob, methods=["GET"]),
]
