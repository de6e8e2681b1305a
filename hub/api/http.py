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


class NulGuard:
    """ASGI middleware: a NUL character in the path or the query is ``invalid_request``.
    No id, name or parameter of this API holds one, and PostgreSQL text cannot (the fuzz
    test found ``GET /v1/audit?space=%00`` answered 500 on PostgreSQL)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and ("\x00" in scope.get("path", "") or b"%00" in
                                        scope.get("query_string", b"").lower()
                                        or b"\x00" in scope.get("query_string", b"")):
            err = InvalidRequest("NUL characters are not allowed in a path or query")
            await error_response(err)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _has_nul(data: Any) -> bool:
    """Does any string (key or value) hold U+0000? Iterative (depth is already bounded)."""
    todo = [data]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return True
        elif isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return False


def _limits(request: Request) -> JsonLimits:
    s = request.app.state.hub.settings
    return JsonLimits(depth=s.json_max_depth, keys=s.json_max_keys, string=s.json_max_string)


async def read_json(request: Request, limit: int, *, allowed: set[str] | None = None,
                    nul: bool = False) -> dict[str, Any]:
    """Read a JSON object body of at most ``limit`` bytes; refuse unknown top-level fields
    and (unless ``nul``: batches, whose entries are stored as escaped JSON) NUL characters,
    which names and other text columns cannot hold on PostgreSQL."""
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
    if not nul and b"\\u0000" in raw and _has_nul(data):
        raise InvalidRequest("NUL characters (\\u0000) are not allowed in this body")
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
