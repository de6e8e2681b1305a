"""HTTP handlers: parse the request, call the domain, shape the response. No decisions here."""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import (
    admin,
    blocks,
    feed,
    grants,
    guard,
    keyrotation,
    logs,
    protocol,
    quotas,
    record,
    space_kinds,
    spaces,
)
from hub import conflict_reports as reports
from hub import purge as purging
from hub import scope as scopes
from hub import screening as screen
from hub import space_delete as sdel
from hub.access import Principal, space_access_txn
from hub.api import events as live
from hub.api.blobs import BLOB_ROUTES
from hub.api.http import (
    JSON,
    checked_nonce,
    claims_then_take,
    client_addr,
    hub_of,
    ndjson,
    off_loop,
    principal,
    proof_thumbprint,
    rate_limit,
    read_json,
)
from hub.api.proofs import PROOF_ROUTES
from hub.api.spacelog import LOG_ROUTES
from hub.quotas import HubQuotas
from hub.store.batches import batch_by_ids_txn
from shared import PROTOCOL_HEADER
from shared.errors import InvalidRequest, NotFound, QuireError, RateLimited, Unavailable
from shared.ids import is_id
from shared.schemas import REQUESTS

SMALL_BODY = 16 * 1024
log = logging.getLogger("quire.hub")


def fields(name: str) -> set[str]:
    """The fields a request body may have: its schema's properties (shared/schemas.py)."""
    return set(REQUESTS[name]["properties"])


async def healthz(request: Request) -> Response:
    return JSON({"ok": True})


async def readyz(request: Request) -> Response:
    hub = hub_of(request)

    def check() -> None:
        with hub.store.read() as conn:
            rec = record.read_txn(conn)
        if rec is None:
            raise Unavailable("hub database is not initialized; run 'quire hub init'")
        # a process whose URL, key or schema is not the database's answers requests the
        # other processes would not: take it out of the proxy's rotation (hub/record.py)
        bad = record.mismatches(rec, public_url=hub.settings.url, key_id=hub.key.kid,
                                schema=hub.schema_head)
        if bad:
            logs.event(log, "not_ready", logging.WARNING, reason="record_mismatch",
                       mismatch=bad)
            raise Unavailable("this process's configuration differs from the hub "
                              "database's record; restart it with the recorded values",
                              {"reason": "record_mismatch", "mismatch": bad})

    try:
        await run_in_threadpool(check)
    except Unavailable:
        raise
    except Exception as e:  # the database is down or unreachable
        raise Unavailable(f"database not reachable: {type(e).__name__}",
                          {"reason": "database"}) from e
    return JSON({"ok": True})


async def hub_info(request: Request) -> Response:
    hub = hub_of(request)

    def info() -> dict[str, Any]:
        with hub.store.read() as conn:
            return spaces.hub_info(conn, hub.key, hub.settings.url)

    return JSON(await run_in_threadpool(info))


async def keys(request: Request) -> Response:
    return JSON({"keys": [hub_of(request).key.jwk()]})


async def hub_keys(request: Request) -> Response:
    hub = hub_of(request)

    def doc() -> dict[str, Any]:
        with hub.store.read() as conn:
            return keyrotation.keys_doc_txn(conn, hub.key)

    return JSON(await run_in_threadpool(doc))


async def redeem(request: Request) -> Response:
    hub = hub_of(request)
    await rate_limit(hub.redeem_limiter, client_addr(request), "invite redemptions")
    body = await read_json(request, SMALL_BODY,
                           allowed=fields("redeem"))
    caller = await principal(request) if request.headers.get("authorization") else None
    out = await run_in_threadpool(spaces.redeem, hub.store, hub.key, hub.settings, body, caller,
                                  hub.now())
    info = logs.current()
    if info is not None:  # the new member's ids, for the access line
        info.user, info.device = out.get("user_id"), out.get("device_id")
    return JSON(out, status_code=201)


async def token(request: Request) -> Response:
    """``POST /v1/token``: refresh_token or device_code grant, with a DPoP proof."""
    hub = hub_of(request)
    await rate_limit(hub.token_limiter, client_addr(request), "token requests")
    body = await read_json(request, SMALL_BODY,
                           allowed=fields("token"))
    grant = body.get("grant_type")
    if grant == "refresh_token":
        jkt = await off_loop(request, proof_thumbprint)
        await rate_limit(hub.refresh_limiter, jkt, "refreshes for this device")
        out = await run_in_threadpool(grants.refresh, hub.store, hub.key, hub.settings, body,
                                      jkt, hub.now())
    elif grant == grants.DEVICE_GRANT:
        jkt = await off_loop(request, proof_thumbprint)
        out = await run_in_threadpool(grants.redeem_device_code, hub.store, hub.key,
                                      hub.settings, body, jkt, hub.now())
    else:
        raise InvalidRequest(f"grant_type must be refresh_token or {grants.DEVICE_GRANT}")
    return JSON(out, headers={"Cache-Control": "no-store"})


async def device_start(request: Request) -> Response:
    hub = hub_of(request)
    await rate_limit(hub.login_limiter, client_addr(request), "device logins")
    body = await read_json(request, SMALL_BODY, allowed=fields("device_start"))
    out = await run_in_threadpool(grants.start_device, hub.store, hub.settings, body, hub.now(),
                                  client_addr(request))
    return JSON(out, status_code=201, headers={"Cache-Control": "no-store"})


async def device_preview(request: Request) -> Response:
    """What approving a user code would do (name, address, time), before the approver
    confirms; counted with approvals, as both tell whether a code exists."""
    p = await principal(request)
    hub = hub_of(request)
    await rate_limit(hub.approve_limiter, p.user_id, "approval attempts")
    body = await read_json(request, SMALL_BODY, allowed=fields("device_approve"))
    return JSON(await run_in_threadpool(grants.preview_device, hub.store, p, body, hub.now()),
                headers={"Cache-Control": "no-store"})


async def device_approve(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    # per user: user codes are short, so guesses are what this bounds
    await rate_limit(hub.approve_limiter, p.user_id, "approval attempts")
    body = await read_json(request, SMALL_BODY, allowed=fields("device_approve"))
    return JSON(await run_in_threadpool(grants.approve_device, hub.store, p, body, hub.now()))


# ---------------------------------------------------------------- administration


def _admin(fn: Any, *, body: set[str] | None = None, params: tuple[str, ...] = (),
           status: int = 200, query: tuple[str, ...] = (), access: bool = False) -> Any:
    """A handler: authenticate, read the body (if any), call ``fn`` in a thread; with
    ``access``, tell open event streams that someone's access changed."""

    async def handler(request: Request) -> Response:
        p = await principal(request)
        hub = hub_of(request)
        args: list[Any] = [request.path_params[k] for k in params]
        for k in query:
            args.append(request.query_params.get(k))
        if body is not None:
            data = await read_json(request, SMALL_BODY, allowed=body)
            args.append(data)
        out = await run_in_threadpool(lambda: fn(hub, p, *args))
        changed = getattr(hub, "access_changed", None)
        if access and not out.get("dry_run") and changed is not None:
            changed(request.path_params.get("space"))
        return JSON(out, status_code=status)

    return handler


def _bool(v: str | None) -> bool:
    return v in ("1", "true", "yes")


async def audit_export(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    qp = request.query_params
    unknown = set(qp) - {"since", "space"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    since = qp.get("since", "0")
    if not since.isdigit() or len(since) > 16:
        raise InvalidRequest("since must be Unix milliseconds")
    await run_in_threadpool(_flush_for, hub, p)
    return await ndjson(admin.audit_lines(hub.store, p, qp.get("space"), int(since)))


def _flush_for(hub: Any, p: Principal) -> None:
    """An owner reading the audit gets the refused attempts counted so far written first
    (hub/refusals.py); nobody else can make the counting windows shorter."""
    if p.is_owner and p.delegation_id is None:
        hub.flush_refusals()


def _verify_audit(hub: Any, p: Principal, space: str | None) -> dict[str, Any]:
    _flush_for(hub, p)
    return admin.verify_audit(hub.store, p, space)


_DRY = fields("dry_run")
ADMIN_ROUTES = [
    Route("/v1/spaces/{space}/rules", _admin(
        lambda h, p, s: admin.list_rules(h.store, p, s), params=("space",)), methods=["GET"]),
    Route("/v1/spaces/{space}/rules", _admin(
        lambda h, p, s, b: admin.add_rule(h.store, p, s, b, h.now(),
                                          dry_run=bool(b.get("dry_run"))), params=("space",),
        body=fields("rule_add"), status=201), methods=["POST"]),
    Route("/v1/spaces/{space}/kinds", _admin(
        lambda h, p, s: space_kinds.show_kinds(h.store, p, s), params=("space",)),
        methods=["GET"]),
    Route("/v1/spaces/{space}/kinds", _admin(
        lambda h, p, s, b: space_kinds.set_kinds(h.store, p, s, b, h.now()),
        params=("space",), body=fields("kinds_set")), methods=["POST"]),
    Route("/v1/spaces/{space}/scope", _admin(
        lambda h, p, s, who, as_user: scopes.show_scope(h.store, p, s, who, as_user),
        params=("space",), query=("who", "as")), methods=["GET"]),
    Route("/v1/spaces/{space}/rules/{rule}/remove", _admin(
        lambda h, p, s, r, b: admin.remove_rule(h.store, p, s, r, b, h.now()),
        params=("space", "rule"), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/spaces/{space}/members", _admin(
        lambda h, p, s: admin.list_members(h.store, p, s), params=("space",)), methods=["GET"]),
    Route("/v1/spaces/{space}/members/{user}/role", _admin(
        lambda h, p, s, u, b: admin.set_role(h.store, p, s, u, b, h.now()),
        params=("space", "user"), body=fields("role_set"), access=True), methods=["POST"]),
    Route("/v1/spaces/{space}/members/{user}/remove", _admin(
        lambda h, p, s, u, b: admin.remove_member(h.store, p, s, u, b, h.now()),
        params=("space", "user"), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/spaces/{space}/invites", _admin(
        lambda h, p, s: admin.list_invites(h.store, p, s), params=("space",)),
        methods=["GET"]),
    Route("/v1/invites/{invite}/revoke", _admin(
        lambda h, p, i, b: admin.revoke_invite(h.store, p, i, b, h.now()),
        params=("invite",), body=_DRY), methods=["POST"]),
    Route("/v1/devices", _admin(
        lambda h, p, a: admin.list_devices(h.store, p, _bool(a)), query=("all",)),
        methods=["GET"]),
    Route("/v1/devices/{device}/revoke", _admin(
        lambda h, p, d, b: admin.revoke_device(h.store, p, d, b, h.now()),
        params=("device",), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/users/{user}/deactivate", _admin(
        lambda h, p, u, b: admin.deactivate_user(h.store, p, u, b, h.now()),
        params=("user",), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/users/{user}/name", _admin(
        lambda h, p, u, b: admin.rename_user(h.store, p, u, b, h.now()),
        params=("user",), body=fields("user_rename")), methods=["POST"]),
    Route("/v1/spaces/{space}/replicas", _admin(
        lambda h, p, s: admin.list_replicas(h.store, p, s), params=("space",)),
        methods=["GET"]),
    Route("/v1/spaces/{space}/replicas/{replica}/revoke", _admin(
        lambda h, p, s, r, b: admin.revoke_replica(h.store, p, s, r, b, h.now()),
        params=("space", "replica"), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/delegations", _admin(
        lambda h, p: admin.list_delegations(h.store, p)), methods=["GET"]),
    Route("/v1/delegations", _admin(
        lambda h, p, b: admin.create_delegation(h.store, h.key, h.settings, p, b, h.now()),
        body=fields("delegation_create"), status=201), methods=["POST"]),
    Route("/v1/delegations/{delegation}/revoke", _admin(
        lambda h, p, d, b: admin.revoke_delegation(h.store, p, d, b, h.now()),
        params=("delegation",), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/spaces/{space}/usage", _admin(
        lambda h, p, s: quotas.usage(h.store, HubQuotas.from_settings(h.settings), p, s),
        params=("space",)), methods=["GET"]),
    Route("/v1/spaces/{space}/screening/allows", _admin(
        lambda h, p, s, e: screen.list_allows(h.store, p, s, e), params=("space",),
        query=("entry",)), methods=["GET"]),
    Route("/v1/spaces/{space}/screening/allows", _admin(
        lambda h, p, s, b: screen.allow(h.store, p, s, b, h.now()), params=("space",),
        body=fields("screening_allow"), status=201), methods=["POST"]),
    Route("/v1/spaces/{space}/delete", _admin(
        lambda h, p, s, b: sdel.delete_space(h.store, h.key, p, s, b, h.now(),
                                             h.settings.space_retention_days),
        params=("space",), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/spaces/{space}/restore", _admin(
        lambda h, p, s, b: sdel.restore_space(h.store, p, s, b, h.now()),
        params=("space",), body=_DRY, access=True), methods=["POST"]),
    Route("/v1/spaces/{space}/blocks", _admin(
        lambda h, p, s: blocks.list_blocks(h.store, p, s), params=("space",)),
        methods=["GET"]),
    Route("/v1/spaces/{space}/blocks", _admin(
        lambda h, p, s, b: blocks.block(h.store, p, s, b, h.now()), params=("space",),
        body=fields("version_block")), methods=["POST"]),
    Route("/v1/spaces/{space}/quota", _admin(
        lambda h, p, s, b: quotas.set_quota(h.store, HubQuotas.from_settings(h.settings), p,
                                            s, b, h.now()),
        params=("space",), body=fields("quota_set")), methods=["POST"]),
    Route("/v1/audit", audit_export, methods=["GET"]),
    Route("/v1/audit/verify", _admin(_verify_audit, query=("space",)),
        methods=["GET"]),
    Route("/v1/token", token, methods=["POST"]),
    Route("/v1/device/code", device_start, methods=["POST"]),
    Route("/v1/device/preview", device_preview, methods=["POST"]),
    Route("/v1/device/approve", device_approve, methods=["POST"]),
]


async def list_spaces(request: Request) -> Response:
    p = await principal(request)
    return JSON(await run_in_threadpool(spaces.list_spaces, hub_of(request).store, p))


async def create_space(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body = await read_json(request, SMALL_BODY, allowed=fields("space_create"))
    out = await run_in_threadpool(spaces.create_space, hub.store, p, body.get("name"), hub.now())
    return JSON(out, status_code=201)


async def create_invite(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    await rate_limit(hub.invite_limiter, p.user_id, "invites created")
    body = await read_json(request, SMALL_BODY, allowed=fields("invite_create"))
    space_ref = request.path_params.get("space")
    s = hub.settings
    out = await run_in_threadpool(spaces.invite, hub.store, p, space_ref, body, hub.now(),
                                  s.invite_ttl, s.invite_ttl_max)
    return JSON(out, status_code=201)


async def register_replica(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body = await read_json(request, SMALL_BODY, allowed=fields("replica_register"))
    out = await run_in_threadpool(spaces.register_replica, hub.store, p,
                                  request.path_params["space"], body, hub.now(),
                                  max_replicas=hub.settings.replicas_per_device)
    return JSON(out, status_code=201)


async def head(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    qp = request.query_params
    nonce = None
    if set(qp) == {"nonce"}:  # a freshness proof: the head signed over the caller's nonce
        nonce = checked_nonce(qp["nonce"])
    elif qp:  # ?wait=S&after=SEQ: long-poll (hub/api/events.py)
        return JSON(await live.long_poll_head(request, p, hub))
    out = await run_in_threadpool(spaces.head, hub.store, hub.key, p,
                                  request.path_params["space"], hub.now(), nonce,
                                  hub.settings.state_root,
                                  HubQuotas.from_settings(hub.settings))
    return JSON(out)


async def verify_space(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    return JSON(await run_in_threadpool(spaces.verify, hub.store, p,
                                        request.path_params["space"]))


async def devices(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    return JSON(await run_in_threadpool(spaces.devices, hub.store, hub.key, p,
                                        request.path_params["space"], hub.now()))


async def _require_protocol(request: Request, hub: Any) -> None:
    """upgrade_required for a replica too old for the space (hub/protocol.py)."""
    version = protocol.client_protocol(request.headers.get(PROTOCOL_HEADER))
    if not protocol.is_current(version):
        def check() -> None:
            with hub.store.read(statements=True) as conn:
                protocol.require_txn(conn, request.path_params["space"], version)
        await run_in_threadpool(check)


async def changes(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    await _require_protocol(request, hub)
    qp = request.query_params
    unknown = set(qp) - {"epoch", "after", "limit", "scope", "only"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    epoch, after, limit = feed.parse_changes_query(qp.get("epoch"), qp.get("after"),
                                                   qp.get("limit"), hub.settings.changes_page,
                                                   hub.settings.changes_page_max)
    return await ndjson(feed.changes(hub.store, p, request.path_params["space"], epoch, after,
                                     limit, feed.Signer(hub.key, hub.now(),
                                                        hub.settings.state_root),
                                     held_scope=qp.get("scope"),
                                     only=feed.parse_only(qp.getlist("only"))))


async def snapshot(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    await _require_protocol(request, hub)
    qp = request.query_params
    unknown = set(qp) - {"only"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    return await ndjson(feed.snapshot(hub.store, p, request.path_params["space"],
                                      feed.Signer(hub.key, hub.now(), hub.settings.state_root),
                                      feed.parse_only(qp.getlist("only"))))


def _rebase_param(request: Request) -> bool:
    """``?rebase=1``: accept the batch on the current head when its parent is an earlier
    head and every base is still current; absent (or ``0``): strict compare-and-swap."""
    qp = request.query_params
    unknown = set(qp) - {"rebase"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    value = qp.get("rebase", "0")
    if value not in ("0", "1") or len(qp.getlist("rebase")) > 1:
        raise InvalidRequest("rebase must be 0 or 1")
    return value == "1"


async def publish(request: Request) -> Response:
    hub = hub_of(request)
    start = time.perf_counter()
    try:
        outcome = await _publish(request, hub)
    except QuireError as e:
        _published(hub, start, "refused", e.code)
        raise
    _published(hub, start, "replayed" if outcome.replayed else "accepted", "")
    # receipts are served as stored so a replay is byte-for-byte the original
    text = '{"receipt":' + outcome.receipt + ',"replayed":' + (
        "true" if outcome.replayed else "false") + "}"
    return Response(text, status_code=200 if outcome.replayed else 201,
                    media_type="application/json")


def _published(hub: Any, start: float, outcome: str, code: str) -> None:
    hub.metrics.guard.labels(outcome=outcome, code=code).inc()
    hub.metrics.publication_seconds.labels(outcome=outcome).observe(
        time.perf_counter() - start)


async def _publish(request: Request, hub: Any) -> Any:
    # the device behind the token is read in the guard's preparing transaction
    claims, (ok, wait) = await claims_then_take(request, hub.publish_limiter)
    if not ok:
        raise RateLimited("too many publications from this device; wait and retry",
                          {"retry_after": wait})
    await _require_protocol(request, hub)
    s = hub.settings
    rebase = _rebase_param(request)
    body = await read_json(request, s.max_body_bytes, nul=True)
    outcome = await run_in_threadpool(
        guard.publish, hub.store, hub.key, claims, request.path_params["space"], body,
        max_ops=s.max_ops, max_body=s.max_entry_body, now=hub.now, hooks=hub.hooks,
        rebase=rebase, state_root=s.state_root, quota=HubQuotas.from_settings(s),
        screening=screen.config_for(s.screening_injection))
    if not outcome.replayed:
        hub.published(outcome)
    return outcome


async def receipt(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    rep, bid = request.path_params["replica"], request.path_params["batch"]
    if not (is_id(rep) and is_id(bid)):
        raise InvalidRequest("replica and batch must be canonical ids")

    def find() -> str:
        with hub.store.read() as conn:
            space, _ = space_access_txn(conn, p, request.path_params["space"], "viewer")
            row = batch_by_ids_txn(conn, rep, bid)
            if row is None or row.space_id != space.id:
                raise NotFound("no receipt for this batch: it was not accepted; push it again")
            return row.receipt

    text = await run_in_threadpool(find)
    return Response('{"receipt":' + text + "}", media_type="application/json")


async def conflict_report(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body = await read_json(request, reports.MAX_BODY, allowed=fields("conflict_report"))
    return JSON(await run_in_threadpool(
        reports.put_report, hub.store, p, request.path_params["space"],
        request.path_params["replica"], body, hub.now(),
        max_rows=hub.settings.conflict_reports_per_member))


async def bump_epoch(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body = await read_json(request, SMALL_BODY, allowed=fields("epoch_bump"))
    out = await run_in_threadpool(spaces.bump_epoch, hub.store, p,
                                  request.path_params["space"], body, hub.now(), hub.key)
    if not out["dry_run"]:
        hub.epoch_changed(out)
    return JSON(out)


async def purge_entries(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    body = await read_json(request, SMALL_BODY, allowed=fields("purge"))
    out = await run_in_threadpool(purging.purge, hub.store, p, request.path_params["space"],
                                  body, hub.now(), hub.key)
    if not out["dry_run"]:  # watchers re-snapshot; the event names no purged entry
        hub.broker.changes.forget(out["space"])  # no cached change line outlives it
        hub.epoch_changed({k: out[k] for k in ("space", "epoch", "previous", "reason")})
    return JSON(out)


async def openapi(request: Request) -> Response:
    from hub.api.openapi import document

    return JSON(document([r for r in request.app.routes if isinstance(r, Route)]))


async def api_docs(request: Request) -> Response:
    """The human page for /v1/openapi.json, rendered on the hub (no script, no CDN)."""
    from hub.api.openapi import docs_page, document

    page, csp = docs_page(document([r for r in request.app.routes if isinstance(r, Route)]))
    return Response(page, media_type="text/html", headers={
        "Content-Security-Policy": csp, "X-Frame-Options": "DENY"})


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/v1/openapi.json", openapi, methods=["GET"]),
    Route("/v1/docs", api_docs, methods=["GET"]),
    Route("/v1/hub", hub_info, methods=["GET"]),
    Route("/v1/keys", keys, methods=["GET"]),
    Route("/v1/hub/keys", hub_keys, methods=["GET"]),
    Route("/v1/invites/redeem", redeem, methods=["POST"]),
    Route("/v1/invites", create_invite, methods=["POST"]),
    Route("/v1/spaces", list_spaces, methods=["GET"]),
    Route("/v1/spaces", create_space, methods=["POST"]),
    Route("/v1/spaces/{space}/invites", create_invite, methods=["POST"]),
    Route("/v1/spaces/{space}/replicas", register_replica, methods=["POST"]),
    Route("/v1/spaces/{space}/replicas/{replica}/conflicts", conflict_report,
          methods=["PUT"]),
    Route("/v1/spaces/{space}/head", head, methods=["GET"]),
    Route("/v1/spaces/{space}/changes", changes, methods=["GET"]),
    Route("/v1/spaces/{space}/snapshot", snapshot, methods=["GET"]),
    Route("/v1/spaces/{space}/devices", devices, methods=["GET"]),
    Route("/v1/spaces/{space}/verify", verify_space, methods=["GET"]),
    Route("/v1/spaces/{space}/batches", publish, methods=["POST"]),
    Route("/v1/spaces/{space}/receipts/{replica}/{batch}", receipt, methods=["GET"]),
    Route("/v1/spaces/{space}/epoch", bump_epoch, methods=["POST"]),
    Route("/v1/spaces/{space}/purge", purge_entries, methods=["POST"]),
    *ADMIN_ROUTES,  # identity and administration (hub/admin.py, hub/grants.py)
    *LOG_ROUTES,  # the space log and its witnesses (hub/spacelog.py)
    *PROOF_ROUTES,  # folder completeness proofs (hub/completeness.py)
    *BLOB_ROUTES,  # attachments' bytes (hub/blobs.py)
    Route("/v1/spaces/{space}/events", live.events, methods=["GET"]),
]
