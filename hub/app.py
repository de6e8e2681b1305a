"""The hub application: wires settings, store, key and routes into a Starlette app."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from hub.api.http import http_error_handler, quire_error_handler, unhandled_error_handler
from hub.api.routes import ROUTES
from hub.dpop import JtiCache
from hub.guard import GuardHooks, Outcome
from hub.keys import HubKey
from hub.ratelimit import RateLimiter
from hub.settings import Settings
from hub.store.db import Store
from shared.errors import QuireError

log = logging.getLogger("quire.hub")


class Hub:
    """Everything a request handler needs, in one place (``request.app.state.hub``)."""

    def __init__(self, settings: Settings, store: Store, key: HubKey,
                 hooks: GuardHooks | None = None):
        self.settings = settings
        self.store = store
        self.key = key
        self.hooks = hooks or GuardHooks()
        self.now: Callable[[], int] = settings.clock
        self.redeem_limiter = RateLimiter(rate_per_s=1.0, burst=10, clock=self.now)
        # identity (hub/access.py, hub/grants.py): DPoP replay cache and grant rate limits
        self.jti_cache = JtiCache(settings.dpop_window, settings.dpop_jti_cache, self.now)
        self.token_limiter = RateLimiter(rate_per_s=2.0, burst=20, clock=self.now)
        self.login_limiter = RateLimiter(rate_per_s=0.2, burst=5, clock=self.now)
        self.approve_limiter = RateLimiter(rate_per_s=0.1, burst=5, clock=self.now)
        self.listeners: list[Callable[[str, dict[str, Any]], None]] = []

    def published(self, outcome: Outcome) -> None:
        """After commit: tell in-process listeners (watchers' event streams)."""
        self._emit("head", {"space": outcome.space_id, "seq": outcome.seq,
                            "digest": outcome.head_digest})

    def epoch_changed(self, info: dict[str, Any]) -> None:
        self._emit("epoch", info)

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        for fn in list(self.listeners):
            try:
                fn(kind, data)
            except Exception:  # a listener must never break a publication
                log.exception("event listener failed")


def create_app(settings: Settings, *, store: Store | None = None, key: HubKey | None = None,
               hooks: GuardHooks | None = None) -> Starlette:
    store = store or Store(settings.database_url, pool_size=settings.db_pool_size)
    key = key or HubKey.load(settings.key_path)
    hub = Hub(settings, store, key, hooks)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.dispose()

    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers={
        QuireError: quire_error_handler,
        HTTPException: http_error_handler,
        Exception: unhandled_error_handler,
    })
    app.state.hub = hub
    return app
