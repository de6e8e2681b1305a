"""Handlers of the blob endpoints (hub/blobs.py decides): an attachment's bytes in and out.

    PUT /v1/spaces/{space}/blobs/{sha256}   raw bytes in; 201 stored, 200 held already;
        with ``Content-Range: bytes START-END/TOTAL`` one range of a resumable upload
    GET /v1/spaces/{space}/blobs/{sha256}/upload   how much of it the hub received
    GET /v1/spaces/{space}/blobs/{sha256}   raw bytes out, as a download: ``?name=`` gives
        the file name (``Content-Disposition``) and the media type by its extension
        (shared/attachments.py); ``nosniff`` and a sandboxing CSP whatever the type
"""

from __future__ import annotations

import re

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import blobs
from hub.api.http import JSON, hub_of, principal, read_bytes
from hub.quotas import HubQuotas
from shared.attachments import OCTET_STREAM, content_disposition, media_type_of
from shared.errors import InvalidRequest

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
    ranged = _content_range(request.headers.get("content-range"), len(data))
    if ranged is None:
        out = await run_in_threadpool(blobs.put_blob, hub.store, quotas, p, space, sha,
                                      data, hub.now())
    else:
        out = await run_in_threadpool(blobs.put_range, hub.store, quotas, p, space, sha,
                                      data, ranged[0], ranged[1], hub.now())
    return JSON(out, status_code=201 if out["stored"] else 200)


_RANGE = re.compile(r"^bytes (\d{1,15})-(\d{1,15})/(\d{1,15})$")


def _content_range(raw: str | None, size: int) -> tuple[int, int] | None:
    """(start, total) of ``Content-Range: bytes START-END/TOTAL`` (END inclusive, the
    body exactly END - START + 1 bytes), None without the header."""
    if raw is None:
        return None
    m = _RANGE.match(raw.strip())
    if m is None:
        raise InvalidRequest("Content-Range must be 'bytes START-END/TOTAL'")
    start, end, total = (int(x) for x in m.groups())
    if end < start or end >= total or end - start + 1 != size:
        raise InvalidRequest("Content-Range does not match the body",
                             {"start": start, "end": end, "total": total, "body": size})
    return start, total


async def upload_status(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    return JSON(await run_in_threadpool(blobs.upload_status, hub.store, p,
                                        request.path_params["space"],
                                        request.path_params["sha256"]))


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
    Route("/v1/spaces/{space}/blobs/{sha256}/upload", upload_status, methods=["GET"]),
    Route("/v1/spaces/{space}/blobs/{sha256}", get_blob, methods=["GET"]),
]
