"""HTTP handlers: parse the request, call the domain, shape the response. No decisions here."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import feed, guard, spaces
from hub.access import Principal, authenticate_txn, bearer_from_header, space_access_txn
from hub.api.http import JSON, ndjson, read_json
from hub.store import queries as q
from shared.errors import InvalidRequest, NotFound, RateLimited, Unavailable
from shared.ids import is_id

SMALL_BODY = 16 * 1024


def _hub(request: Request) -> Any:
    return request.app.state.hub


async def principal(request: Request) -> Principal:
    token = bearer_from_header(request.headers.get("authorization"))
    hub = _hub(request)

    def lookup() -> Principal:
        with hub.store.read() as conn:
            return authenticate_txn(conn, token)

    return await run_in_threadpool(lookup)


async def healthz(request: Request) -> Response:
    return JSON({"ok": True})


async def readyz(request: Request) -> Response:
    hub = _hub(request)

    def check() -> None:
        with hub.store.read() as conn:
            if q.hub_state_txn(conn) is None:
                raise Unavailable("hub database is not initialized; run 'quire hub init'")

    try:
        await run_in_threadpool(check)
    except Unavailable:
        raise
    except Exception as e:  # the database is down or unreachable
        raise Unavailable(f"database not reachable: {type(e).__name__}") from e
    return JSON({"ok": True})


async def hub_info(request: Request) -> Response:
    hub = _hub(request)

    def info() -> dict[str, Any]:
        with hub.store.read() as conn:
            return spaces.hub_info(conn, hub.key)

    return JSON(await run_in_threadpool(info))


async def keys(request: Request) -> Response:
    return JSON({"keys": [_hub(request).key.jwk()]})


async def redeem(request: Request) -> Response:
    hub = _hub(request)
    client = request.client.host if request.client else "?"
    ok, wait = hub.redeem_limiter.allow(client)
    if not ok:
        raise RateLimited("too many invite redemptions; wait and retry", {"retry_after": wait})
    body = await read_json(request, SMALL_BODY,
                           allowed={"code", "device_name", "device_key", "user_name"})
    auth = request.headers.get("authorization")
    bearer = bearer_from_header(auth) if auth else None
    out = await run_in_threadpool(spaces.redeem, hub.store, hub.key, body, bearer, hub.now())
    return JSON(out, status_code=201)


async def list_spaces(request: Request) -> Response:
    p = await principal(request)
    return JSON(await run_in_threadpool(spaces.list_spaces, _hub(request).store, p))


async def create_space(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    body = await read_json(request, SMALL_BODY, allowed={"name"})
    out = await run_in_threadpool(spaces.create_space, hub.store, p, body.get("name"), hub.now())
    return JSON(out, status_code=201)


async def create_invite(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    body = await read_json(request, SMALL_BODY, allowed={"role", "ttl_seconds"})
    space_ref = request.path_params.get("space")
    s = hub.settings
    out = await run_in_threadpool(spaces.invite, hub.store, p, space_ref, body, hub.now(),
                                  s.invite_ttl, s.invite_ttl_max)
    return JSON(out, status_code=201)


async def register_replica(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    body = await read_json(request, SMALL_BODY, allowed={"name"})
    out = await run_in_threadpool(spaces.register_replica, hub.store, p,
                                  request.path_params["space"], body, hub.now())
    return JSON(out, status_code=201)


async def head(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    out = await run_in_threadpool(spaces.head, hub.store, hub.key, p,
                                  request.path_params["space"], hub.now())
    return JSON(out)


async def changes(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    qp = request.query_params
    unknown = set(qp) - {"epoch", "after", "limit"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    epoch, after, limit = feed.parse_changes_query(qp.get("epoch"), qp.get("after"),
                                                   qp.get("limit"), hub.settings.changes_page,
                                                   hub.settings.changes_page_max)
    return await ndjson(feed.changes(hub.store, p, request.path_params["space"], epoch, after,
                                     limit))


async def snapshot(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    return await ndjson(feed.snapshot(hub.store, p, request.path_params["space"]))


async def publish(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    s = hub.settings
    body = await read_json(request, s.max_body_bytes)
    outcome = await run_in_threadpool(
        guard.publish, hub.store, hub.key, p, request.path_params["space"], body,
        max_ops=s.max_ops, max_body=s.max_entry_body, now=hub.now, hooks=hub.hooks)
    if not outcome.replayed:
        hub.published(outcome)
    # receipts are served as stored so a replay is byte-for-byte the original
    text = '{"receipt":' + outcome.receipt + ',"replayed":' + (
        "true" if outcome.replayed else "false") + "}"
    return Response(text, status_code=200 if outcome.replayed else 201,
                    media_type="application/json")


async def receipt(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    rep, bid = request.path_params["replica"], request.path_params["batch"]
    if not (is_id(rep) and is_id(bid)):
        raise InvalidRequest("replica and batch must be canonical ids")

    def find() -> str:
        with hub.store.read() as conn:
            space, _ = space_access_txn(conn, p, request.path_params["space"], "viewer")
            row = q.batch_by_ids_txn(conn, rep, bid)
            if row is None or row.space_id != space.id:
                raise NotFound("no receipt for this batch: it was not accepted; push it again")
            return row.receipt

    text = await run_in_threadpool(find)
    return Response('{"receipt":' + text + "}", media_type="application/json")


async def bump_epoch(request: Request) -> Response:
    p = await principal(request)
    hub = _hub(request)
    body = await read_json(request, SMALL_BODY, allowed={"reason"})
    out = await run_in_threadpool(spaces.bump_epoch, hub.store, p,
                                  request.path_params["space"], body, hub.now())
    hub.epoch_changed(out)
    return JSON(out)


async def openapi(request: Request) -> Response:
    from hub.api.openapi import document

    return JSON(document(ROUTES))


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/v1/openapi.json", openapi, methods=["GET"]),
    Route("/v1/hub", hub_info, methods=["GET"]),
    Route("/v1/keys", keys, methods=["GET"]),
    Route("/v1/invites/redeem", redeem, methods=["POST"]),
    Route("/v1/invites", create_invite, methods=["POST"]),
    Route("/v1/spaces", list_spaces, methods=["GET"]),
    Route("/v1/spaces", create_space, methods=["POST"]),
    Route("/v1/spaces/{space}/invites", create_invite, methods=["POST"]),
    Route("/v1/spaces/{space}/replicas", register_replica, methods=["POST"]),
    Route("/v1/spaces/{space}/head", head, methods=["GET"]),
    Route("/v1/spaces/{space}/changes", changes, methods=["GET"]),
    Route("/v1/spaces/{space}/snapshot", snapshot, methods=["GET"]),
    Route("/v1/spaces/{space}/batches", publish, methods=["POST"]),
    Route("/v1/spaces/{space}/receipts/{replica}/{batch}", receipt, methods=["GET"]),
    Route("/v1/spaces/{space}/epoch", bump_epoch, methods=["POST"]),
]
