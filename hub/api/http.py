"""Request parsing and response helpers: the only place that turns HTTP into values and
``QuireError`` into responses, and the one place a handler learns who is calling.

    hub_of(request)            the running hub (settings, store, key, caches, limiters)
    claims(request)            access token + DPoP proof: the stateless half (no database)
    principal(request)         claims, then the device and user as they are now (a read)
    proof_thumbprint(request)  a DPoP proof alone (the token endpoint): its key's thumbprint
    rate_limit / claims_then_take / off_loop   the above off the event loop when the replay
                               cache or the bucket lives in PostgreSQL
    read_json, read_bytes, ndjson, JSON    bodies in, responses out; error_response for ``QuireError``
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from hub import logs
from hub.access import Principal, authenticate_txn, verify_request
from hub.clientaddr import client_of
from hub.dpop import verify_proof
from hub.store.db import OUTAGE_ERRORS, outage
from hub.tokens import AccessClaims
from shared.canonical import loads_strict
from shared.errors import Internal, InvalidRequest, NotFound, QuireError, RateLimited, TooLarge
from shared.ids import is_id
from shared.jsonlimits import JsonLimitError, JsonLimits
from shared.signed import MAX_NONCE
from shared.wire import REPLICA_HEADER

log = logging.getLogger("quire.hub.api")
T = TypeVar("T")


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        import json

        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# headers every answer carries (the API's, the console's, errors and files): no browser
# may guess another type than the one sent (a JSON answer read as HTML or script)
ANSWER_HEADERS = ((b"x-content-type-options", b"nosniff"),)


class AnswerHeaders:
    """ASGI middleware: ``ANSWER_HEADERS`` on every answer, unless it set them itself."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with(message: Any) -> None:
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", ())}
                message["headers"] = [*message.get("headers", ()),
                                      *((k, v) for k, v in ANSWER_HEADERS if k not in have)]
            await send(message)

        await self.app(scope, receive, send_with)


def error_response(exc: QuireError) -> Response:
    # also sent by the last-resort handler, outside every middleware
    headers = {k.decode(): v.decode() for k, v in ANSWER_HEADERS}
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
    # the traceback, tied to the request's access line by its request id; not the raw path
    # (it may carry an invite code), which the access line names by its route template
    logs.failure(log, "unhandled_error", method=request.method, error=type(exc).__name__)
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
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"body larger than {limit} bytes", {"limit": limit})
            chunks.append(chunk)
    except ClientDisconnect:
        # the client went away mid-body (killed, cut off): a request that never arrived
        # whole, not an error of the hub's
        raise InvalidRequest("the body ended early: the client went away") from None
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


async def read_bytes(request: Request, limit: int) -> bytes:
    """Read a body of raw bytes of at most ``limit`` (0: no limit), or ``too_large``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if limit and int(declared) > limit:
                raise TooLarge(f"body larger than {limit} bytes", {"limit": limit})
        except ValueError as e:
            raise InvalidRequest("bad Content-Length") from e
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if limit and size > limit:
                raise TooLarge(f"body larger than {limit} bytes", {"limit": limit})
            chunks.append(chunk)
    except ClientDisconnect:
        raise InvalidRequest("the body ended early: the client went away") from None
    return b"".join(chunks)


async def ndjson(it: Iterator[bytes]) -> Response:
    """Stream NDJSON chunks. The first chunk is pulled before headers are sent, so access
    checks inside the generator still produce proper error responses. A database that
    goes away mid-stream cuts the stream (no ``end`` line: the client retries, as for any
    cut transfer) with one warning line, not a traceback (hub/store/db.py ``outage``)."""
    first = await run_in_threadpool(next, it, None)

    async def body() -> Any:
        if first is not None:
            yield first
        try:
            async for chunk in iterate_in_threadpool(it):
                yield chunk
        except OUTAGE_ERRORS as e:
            reason = outage(e)
            if reason is None:
                raise
            logs.event(log, "stream_cut", logging.WARNING, error=reason,
                       why="database unavailable")

    return StreamingResponse(body(), media_type="application/x-ndjson")


# ---------------------------------------------------------------- who is calling


def checked_nonce(nonce: str) -> str:
    """A caller's nonce for a head signed over it: 1-64 of ``A-Za-z0-9-_``."""
    if not (0 < len(nonce) <= MAX_NONCE and nonce.isascii()
            and nonce.replace("-", "").replace("_", "").isalnum()):
        raise InvalidRequest(f"nonce: 1-{MAX_NONCE} of A-Z, a-z, 0-9, '-', '_'")
    return nonce


def hub_of(request: Request) -> Any:
    """The running hub (hub/app.py ``Hub``) this request reached."""
    return request.app.state.hub


def claims(request: Request) -> AccessClaims:
    """Access token + DPoP proof (hub/access.py): the stateless half of authentication.
    The caller's ids go into the request's access line (hub/logs.py)."""
    hub = hub_of(request)
    found = _verify(request, hub)
    info = logs.current()
    if info is not None:
        info.user, info.device, info.agent = found.user_id, found.device_id, found.agent
    return found


def _verify(request: Request, hub: Any) -> AccessClaims:
    return verify_request(hub.key, hub.jti_cache, aud=hub.settings.url,
                          method=request.method, path=request.url.path,
                          authorization=request.headers.get("authorization"),
                          proof=request.headers.get("dpop"), now_ms=hub.now(),
                          window_s=hub.settings.dpop_window, tokens=hub.token_cache)


async def off_loop(request: Request, fn: Callable[[Request], T]) -> T:
    """``fn(request)``; in the thread pool when the DPoP replay cache is in PostgreSQL."""
    if getattr(hub_of(request).jti_cache, "blocking", False):
        return await run_in_threadpool(fn, request)
    return fn(request)


async def principal(request: Request) -> Principal:
    """Access token + DPoP proof (hub/access.py), then the device as it is now."""
    hub = hub_of(request)
    found = await off_loop(request, claims)
    now = hub.now()

    replica = request.headers.get(REPLICA_HEADER)
    if replica is not None and not is_id(replica):
        raise InvalidRequest(f"{REPLICA_HEADER} must be a replica id")

    def lookup() -> Principal:
        with hub.store.read() as conn:
            p = authenticate_txn(conn, found, now)
        # a replica names itself on its pulls: space access then also checks that replica
        # (this device's, in this space, not revoked: hub/access.py space_access_txn)
        return dataclasses.replace(p, replica_id=replica) if replica else p

    return await run_in_threadpool(lookup)


def proof_thumbprint(request: Request) -> str:
    """A DPoP proof without an access token (token endpoint): the key's thumbprint."""
    hub = hub_of(request)
    return verify_proof(request.headers.get("dpop"), method=request.method,
                        url=hub.settings.url.rstrip("/") + request.url.path, access_token=None,
                        now_ms=hub.now(), window_s=hub.settings.dpop_window,
                        cache=hub.jti_cache)


async def rate_limit(limiter: Any, key: str, what: str) -> None:
    """Take a token or raise rate_limited; shared limiters (PostgreSQL) run off the loop."""
    if getattr(limiter, "blocking", False):
        ok, wait = await run_in_threadpool(limiter.allow, key)
    else:
        ok, wait = limiter.allow(key)
    if not ok:
        raise RateLimited(f"too many {what}; wait and retry", {"retry_after": wait})


async def claims_then_take(request: Request, limiter: Any
                           ) -> tuple[AccessClaims, tuple[bool, int]]:
    """``claims``, then a token of ``limiter`` for the caller's device: on PostgreSQL (the
    replay cache and the bucket in the database) both in ONE thread-pool hop, not two."""
    def both(req: Request) -> tuple[AccessClaims, tuple[bool, int]]:
        found = claims(req)
        return found, limiter.allow(found.device_id)

    if getattr(hub_of(request).jti_cache, "blocking", False) or getattr(limiter, "blocking",
                                                                        False):
        return await run_in_threadpool(both, request)
    return both(request)


def client_addr(request: Request) -> str:
    """The TCP peer, or the client a trusted proxy names (hub/clientaddr.py)."""
    return client_of(request.client.host if request.client else None,
                     request.headers.items(), hub_of(request).settings)
