"""Request observation, as plain ASGI middleware around the router:

    request ──► request id (a well-formed ``X-Request-Id`` from the proxy, or a new one)
            ──► bound as the request context (hub/logs.py) for every log line and audit
                event of the request
            ──► the app ──► response start: ``X-Request-Id`` header, status noted
            ──► response end: one ``access`` line (method, route template, status, error
                code and reason, duration, principal ids) and the request latency histogram;
                ``on_done`` (the app: a refused attempt is counted for the audit log,
                hub/refusals.py); the client's address as the rate limits see it
                (hub/clientaddr.py), and the user and device of a console session too

Never the raw path's secrets: the line carries the route template (``/v1/invites/{invite}
/revoke``), not the path, and no query string or header values.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from starlette.routing import Match

from hub import logs

log = logging.getLogger("quire.hub.access")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,64}$")
STREAMS = ("/events",)  # long-lived: their duration is not a request latency


class Observe:
    def __init__(self, app: Any, *, metrics: Any, routes: list[Any],
                 on_done: Any = None, client: Any = None):
        self.app = app
        self.on_done = on_done
        self.metrics = metrics
        self.routes = routes
        self.client = client  # scope -> the client's address as the limits see it
        # endpoint -> (route, its whole path template): routes inside a Mount (the console)
        # are listed with the mount's prefix, so their lines name them
        self._by_endpoint: dict[Any, list[tuple[Any, str]]] = {}
        for r, path in _flat(routes, ""):
            self._by_endpoint.setdefault(getattr(r, "endpoint", None), []).append((r, path))

    def template(self, scope: dict[str, Any]) -> str:
        found = self._by_endpoint.get(scope.get("endpoint"), [])
        if len(found) == 1:
            return found[0][1]
        for r, path in found:
            if r.matches(scope)[0] == Match.FULL:
                return path
        for r in self.routes:
            if r.matches(scope)[0] == Match.FULL:
                return str(r.path)
        return "(unmatched)"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = ""
        for k, v in scope.get("headers", ()):
            if k == b"x-request-id":
                given = v.decode("latin-1")
                break
        rid = given if REQUEST_ID.match(given) else uuid.uuid4().hex
        info = logs.RequestInfo(rid)
        token = logs.bind(info)
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            route = self.template(scope)
            if status >= 400 and info.code is None:
                info.code = "internal" if status >= 500 else "http_error"
            client = None
            if self.client is not None and log.isEnabledFor(logging.INFO):
                try:
                    client = self.client(scope)
                except Exception:  # noqa: BLE001 - an address must never break a response
                    client = None
            logs.event(log, "access", method=scope.get("method"), route=route, status=status,
                       code=info.code, reason=info.reason, duration_ms=round(elapsed * 1000, 2),
                       user=info.user, device=info.device, agent=info.agent, client=client,
                       **info.extra)
            if not route.endswith(STREAMS):
                self.metrics.request_seconds.labels(
                    method=scope.get("method", "?"), route=route,
                    status=str(status)).observe(elapsed)
            if self.on_done is not None and info.code is not None:
                try:
                    self.on_done(scope, route, info)
                except Exception:  # noting a refusal must never break a response
                    logs.failure(log, "after_response_failed")
            logs.unbind(token)


def _flat(routes: list[Any], prefix: str) -> list[tuple[Any, str]]:
    """Every route with its whole path template, mounts opened (``/console/signin``)."""
    out: list[tuple[Any, str]] = []
    for r in routes:
        inner = getattr(r, "routes", None)
        if inner and not hasattr(r, "endpoint"):
            out += _flat(list(inner), prefix + str(r.path))
        else:
            out.append((r, prefix + str(getattr(r, "path", ""))))
    return out
