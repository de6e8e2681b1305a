"""The hub application: wires settings, store, key and routes into a Starlette app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Mount

from hub import logs, signed_state
from hub import screening as screen
from hub.api.http import (
    AnswerHeaders,
    NulGuard,
    http_error_handler,
    quire_error_handler,
    unhandled_error_handler,
)
from hub.api.observe import Observe
from hub.api.proposals import PROPOSAL_ROUTES
from hub.api.reads import READ_ROUTES
from hub.api.routes import ROUTES
from hub.clientaddr import check_header, client_of, parse_trusted
from hub.console import consent_pages, proposal_pages
from hub.console import report_pages as reports
from hub.console.admin_pages import CONSOLE_ADMIN
from hub.console.pages import CONSOLE
from hub.dpop import JtiCache
from hub.events import Broker
from hub.guard import GuardHooks, Outcome
from hub.keys import HubKey
from hub.metrics import Metrics, refusal_reason
from hub.refusals import CODES as REFUSAL_CODES
from hub.refusals import Refusals
from hub.remote_mcp.wiring import remote_endpoint, remote_routes
from hub.settings import Settings
from hub.sharedlimits import SharedJti, StreamSlots, limiter
from hub.store.db import OUTAGE_ERRORS, Store, outage
from hub.store.sharedlimits_sql import PgShared
from hub.tokens import TokenCache
from shared.errors import QuireError, Unavailable

log = logging.getLogger("quire.hub")


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:  # between a rotation's two renames: keep the loaded key
        return None
    return st.st_ino, st.st_mtime_ns


class Hub:
    """Everything a request handler needs, in one place (``request.app.state.hub``)."""

    def __init__(self, settings: Settings, store: Store, key: HubKey,
                 hooks: GuardHooks | None = None, key_path: Path | None = None):
        self.settings = settings
        self.store = store
        self._key = key
        # the key file this process watches: 'quire hub key rotate' replaces it while the
        # process serves; the next signature after that uses the new key (hub/keyrotation.py)
        self._key_path = key_path
        self._key_stamp = _stamp(key_path) if key_path is not None else None
        self.hooks = hooks or GuardHooks()
        self.now: Callable[[], int] = settings.clock
        screen.config_for(settings.screening_injection)  # a bad pattern fails at start
        # rate limits and the DPoP replay cache: in memory on SQLite, shared by every hub
        # process on PostgreSQL (hub/sharedlimits.py)
        self.shared = None if store.sqlite else PgShared(store.engine, self.now)
        lim, s = partial(limiter, self.shared, clock=self.now), settings
        self.redeem_limiter = lim("redeem", 1.0, 10)
        self.jti_cache = (JtiCache(s.dpop_window, s.dpop_jti_cache, self.now) if self.shared
                          is None else SharedJti(s.dpop_window, s.dpop_jti_cache, self.shared))
        self.token_cache = TokenCache()  # verified access tokens until exp (hub/tokens.py)
        self.token_limiter = lim("token", 2.0, 20)
        self.login_limiter = lim("device_code", s.device_codes_per_min / 60,
                                 s.device_codes_per_min)
        self.approve_limiter = lim("approve", 0.1, 5)
        self.invite_limiter = lim("invite", s.invites_per_min / 60, s.invites_per_min)
        self.refresh_limiter = lim("refresh", s.refreshes_per_min / 60, s.refreshes_per_min)
        self.publish_limiter = lim("publish", s.publications_per_min / 60,
                                   s.publications_per_min)
        self.stream_slots = StreamSlots(s.streams_per_device)
        self.refusals = Refusals(s.audit_refusal_keys)  # counted, then audited (refusals.py)
        self.listeners: list[Callable[[str, dict[str, Any]], None]] = []
        self.metrics = Metrics()
        self.metrics.watch_pool(store.pool_stats)
        self._schema_head: str | None = None
        # on PostgreSQL other hub processes publish too: LISTEN for their heads (hub/events.py)
        dsn = None if store.sqlite else store.url.replace("postgresql+psycopg://",
                                                          "postgresql://", 1)
        self.broker = Broker(pg_dsn=dsn, on_notify_lag=self.metrics.notify_lag.observe,
                             clock=self.now)
        self.listeners.append(self.broker.local)
        self.metrics.watch_fanout(lambda: self.broker.visits)

    @property
    def key(self) -> HubKey:
        """The hub signing key; reloaded when its file changed (one stat a use)."""
        if self._key_path is not None:
            stamp = _stamp(self._key_path)
            if stamp != self._key_stamp and stamp is not None:
                old, self._key = self._key, HubKey.load(self._key_path)
                self._key_stamp = stamp
                logs.event(log, "hub_key_reloaded", previous=old.kid, key_id=self._key.kid)
        return self._key

    def published(self, outcome: Outcome) -> None:
        """After commit: tell in-process listeners (watchers' event streams). Other hub
        processes heard it from the committing transaction's NOTIFY."""
        self.metrics.publications.inc()
        self._emit("head", {"space": outcome.space_id, "seq": outcome.seq,
                            "digest": outcome.head_digest, "epoch": outcome.epoch,
                            "at": outcome.at, "state": outcome.state})

    @property
    def schema_head(self) -> str | None:
        """The schema revision this release needs (read once)."""
        if self._schema_head is None:
            from hub.store.migrate import alembic_head

            self._schema_head = alembic_head()
        return self._schema_head

    def refused(self, scope: dict[str, Any], route: str, info: logs.RequestInfo) -> None:
        """After an error response: a refused attempt is counted for the audit log, by its
        principal when authentication got that far, else by its client address."""
        if info.code not in REFUSAL_CODES:
            return
        if info.user:
            who = {"user": info.user, "device": info.device or ""}
            if info.agent:
                who["agent"] = info.agent
        else:
            who = {"client": self.client_address(scope)}
        space = (scope.get("path_params") or {}).get("space")
        self.refusals.note(who, info.code, route, space, self.now())

    def client_address(self, scope: dict[str, Any]) -> str:
        """The request's client as the rate limits see it (hub/clientaddr.py)."""
        client = scope.get("client")
        headers = [(k.decode("latin-1"), v.decode("latin-1"))
                   for k, v in scope.get("headers", ())]
        return client_of(client[0] if client else None, headers, self.settings)

    def flush_refusals(self) -> int:
        return self.refusals.flush(self.store, self.now())

    def shutting_down(self) -> None:
        """The process is stopping (a signal handler calls this): end every event stream
        and long-poll now, so uvicorn's graceful shutdown finds nothing to wait for."""
        self.broker.shutdown()

    def epoch_changed(self, info: dict[str, Any]) -> None:
        logs.event(log, "epoch_changed", space=info.get("space"), epoch=info.get("epoch"),
                   previous=info.get("previous"))
        self._emit("epoch", info)
        self._notify_others("epoch", info)

    def access_changed(self, space_id: str | None = None) -> None:
        """After a revocation or membership change commits: open event streams re-check
        their caller now (they also re-check every ``events_recheck_ms``)."""
        info = {"space": space_id} if space_id else {}
        self._emit("access", info)
        self._notify_others("access", info)

    def _notify_others(self, kind: str, data: dict[str, Any]) -> None:
        if self.broker.pg_dsn:  # a short connection of its own, off the event loop
            threading.Thread(target=self.broker.notify, args=(kind, data), daemon=True).start()

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        for fn in list(self.listeners):
            try:
                fn(kind, data)
            except Exception:  # a listener must never break a publication
                logs.failure(log, "event_listener_failed", kind=kind)


def _build_trees(store: Store, stop: threading.Event) -> None:
    """The folder trees a migrated hub lacks, built at start (hub/signed_state.py); a
    failure is logged and left to the next publication of each space."""
    try:
        signed_state.build_missing_trees(store, stop)
    except Exception:  # noqa: BLE001 - never stops the hub: publications build it too
        logs.failure(log, "folder_tree_build_failed")


def create_app(settings: Settings, *, store: Store | None = None, key: HubKey | None = None,
               hooks: GuardHooks | None = None) -> Starlette:
    parse_trusted(settings.trusted_proxies)  # a bad trusted_proxies fails at start
    check_header(settings.proxy_header)  # so does a proxy_header the hub cannot read
    store = store or Store(settings.database_url, pool_size=settings.db_pool_size)
    key_path = None if key is not None else settings.key_path
    key = key or HubKey.load(settings.key_path)
    hub = Hub(settings, store, key, hooks, key_path)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub.broker.start(asyncio.get_running_loop())
        flusher = asyncio.create_task(_flush_refusals(hub))
        stop_trees = threading.Event()  # folder trees of spaces from before migration 0030
        trees = asyncio.create_task(asyncio.to_thread(_build_trees, store, stop_trees)) \
            if settings.state_root else None
        async with remote.lifespan() if remote else contextlib.nullcontext():
            yield
        stop_trees.set()
        if trees is not None:
            await trees
        flusher.cancel()
        hub.broker.stop()
        await asyncio.to_thread(hub.flush_refusals)  # what the last window counted
        store.dispose()

    def noted(handler: Any) -> Any:
        """Every error response: counted by code and reason, named in the access line."""

        async def handle(request: Any, exc: Exception) -> Any:
            response = await handler(request, exc)
            code = getattr(exc, "code", None) or ("not_found" if response.status_code == 404
                                                  else "invalid_request"
                                                  if response.status_code < 500
                                                  else "internal")
            reason = refusal_reason(getattr(exc, "details", None) or {})
            hub.metrics.refusals.labels(code=code, reason=reason).inc()
            info = logs.current()
            if info is not None:
                info.code, info.reason = code, reason or None
            return response

        return handle

    on_quire_error = noted(quire_error_handler)

    async def on_database_error(request: Any, exc: Exception) -> Any:
        """The database is down, unreachable or overloaded: 503 ``unavailable`` (retryable),
        one warning line and no traceback. Any other database error is a bug: re-raised, it
        takes the unhandled-error path (500 ``internal``, logged with its traceback)."""
        reason = outage(exc)
        if reason is None:
            raise exc
        logs.event(log, "database_unavailable", logging.WARNING, error=reason,
                   path=request.url.path)
        return await on_quire_error(request, Unavailable(
            "the hub's database is unavailable; nothing was changed, retry later",
            {"reason": "database"}))

    served = [*ROUTES, *READ_ROUTES, *PROPOSAL_ROUTES,
              Mount("/console/admin", routes=[*reports.ADMIN_ROUTES, *CONSOLE_ADMIN.routes]),
              Mount("/console", routes=[*reports.ROUTES, *consent_pages.ROUTES,
                                        *proposal_pages.ROUTES,
                                        *CONSOLE.routes])]
    remote = remote_endpoint(hub)  # /mcp and its OAuth server (hub/remote_mcp/, D136)
    if remote is not None:
        served += remote_routes(hub, remote)
    app = Starlette(routes=served, lifespan=lifespan, exception_handlers={
        QuireError: on_quire_error,
        **{cls: on_database_error for cls in OUTAGE_ERRORS},
        HTTPException: noted(http_error_handler),
        Exception: noted(unhandled_error_handler),
    })
    app.state.hub = hub
    app.add_middleware(NulGuard)  # inside Observe: its refusals are logged and counted
    app.add_middleware(AnswerHeaders)  # nosniff on every answer (hub/api/http.py)
    app.add_middleware(Observe, metrics=hub.metrics, routes=served, on_done=hub.refused,
                       client=hub.client_address)
    return app


async def _flush_refusals(hub: Hub) -> None:
    """Write the refused attempts counted in each window (hub/refusals.py), off the loop."""
    while True:
        await asyncio.sleep(max(1, hub.settings.audit_refusal_window))
        if hub.refusals.pending():
            await asyncio.to_thread(hub.flush_refusals)
