"""Request parsing and response helpers: the only place that turns HTTP into values and
``QuireError`` into responses."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from shared.canonical import loads_strict
from shared.errors import Internal, InvalidRequest, NotFound, QuireError, TooLarge
from shared.jsonlimits import JsonLimitError, JsonLimits

log = logging.getLogger("quire.hub.api")


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        import json

        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def error_response(exc: QuireError) -> Response:
    headers = {}
    if "retry_after" in exc.details:
        headers["Retry-After"] = str(exc.details["retry_after"])
    return JSON(exc.to_wire(), status_code=exc.status, headers=headers)


async def quire_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, QuireError)
    return error_response(exc)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(NotFound(f"no route {request.url.path}"))
    if exc.status_code == 405:
        return JSON({"error": {"code": "invalid_request",
                               "message": f"method {request.method} not allowed here",
                               "details": {}}}, status_code=405)
    return JSON({"error": {"code": "invalid_request", "message": str(exc.detail),
                           "details": {}}}, status_code=exc.status_code)


async def unhandled_error_handler(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(Internal("internal error; the hub logged it"))


def _limits(request: Request) -> JsonLimits:
    s = request.app.state.hub.settings
    return JsonLimits(depth=s.json_max_depth, keys=s.json_max_keys, string=s.json_max_string)


async def read_json(request: Request, limit: int, *, allowed: set[str] | None = None
                    ) -> dict[str, Any]:
    """Read a JSON object body of at most ``limit`` bytes; refuse unknown top-level fields."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise TooLarge(f"body larger than {limit} bytes", {"limit": limit})
        except ValueError as e:
            raise InvalidRequest("bad Content-Length") from e
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"body larger than {limit} bytes", {"limit": limit})
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw:
        raise InvalidRequest("a JSON object body is required")
    try:
        data = loads_strict(raw, _limits(request))
    except JsonLimitError as e:
        raise InvalidRequest(f"body refused before parsing: {e}",
                             {"limit": e.what, "max": e.limit}) from e
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise InvalidRequest(f"body is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise InvalidRequest("body must be a JSON object")
    if allowed is not None:
        unknown = set(data) - allowed
        if unknown:
            raise InvalidRequest(f"unknown fields: {', '.join(sorted(unknown))}",
                                 {"fields": sorted(unknown)})
    return data


async def ndjson(it: Iterator[bytes]) -> Response:
    """Stream NDJSON chunks. The first chunk is pulled before headers are sent, so access
    checks inside the generator still produce proper error responses."""
    first = await run_in_threadpool(next, it, None)

    async def body() -> Any:
        if first is not None:
            yield first
        async for chunk in iterate_in_threadpool(it):
            yield chunk

    return StreamingResponse(body(), media_type="application/x-ndjson")
