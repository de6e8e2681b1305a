"""Header and body timeouts for ``quire hub serve``: a hub reached without a proxy must not
let a slow client hold a connection for as long as it keeps sending (uvicorn has a
keep-alive timeout between requests and nothing while one arrives).

    connection made, or the first byte of a request ──► header timer (``header_timeout_s``)
        └─ the headers complete in time: timer cancelled (``HeaderTimeoutProtocol``)
        └─ they do not: the connection is closed, nothing was handed to the app
    the app reads the body ──► ``BodyTimeout`` (ASGI middleware): the whole body must
        arrive within ``body_timeout_s`` of the request's start
        └─ it does not: ``invalid_request`` (reason ``body_timeout``) with
           ``Connection: close``; the handler never sees a partial body
    an answer sent before the body was read (too large, refused) closes the connection:
        the rest of the body is never waited for

A long answer (an event stream, a long-poll) is not a slow request: once its body is read
(a GET's is empty) the middleware passes every ``receive`` through untouched, and the
header timer only runs while headers arrive. Behind a proxy these are the proxy's job too
(docs/operations.md, "Timeouts").
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hub import logs
from shared.errors import InvalidRequest

log = logging.getLogger("quire.hub")


def header_timeout_protocol(timeout_s: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with a header timer of ``timeout_s`` seconds (the
    class uvicorn's ``Config(http=…)`` takes)."""

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            logs.event(log, "header_timeout", logging.WARNING, timeout_s=timeout_s,
                       client=self.client[0] if self.client else None)
            self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


def _has_body(scope: Any) -> bool:
    for k, v in scope.get("headers", ()):
        if (k == b"content-length" and v.strip() not in (b"", b"0")) or \
                k == b"transfer-encoding":
            return True
    return False


class BodyTimeout:
    """ASGI middleware (around the whole app): a request's body must arrive within
    ``timeout_s`` seconds of the request's start; past it, reading it raises
    ``invalid_request`` (``body_timeout``), which the app answers as any refusal, and an
    answer sent before the body was read closes the connection."""

    def __init__(self, app: Any, timeout_s: float):
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = time.monotonic() + self.timeout_s
        body_done = False

        async def timed_receive() -> Any:
            nonlocal body_done
            if body_done:
                return await receive()  # a stream waiting for the client to leave
            try:
                message = await asyncio.wait_for(receive(),
                                                 max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                logs.event(log, "body_timeout", logging.WARNING, timeout_s=self.timeout_s,
                           path=scope.get("path"))
                # the app's one error handler answers it; the answer closes the connection
                raise InvalidRequest(
                    f"the request body did not arrive within {self.timeout_s:g} s",
                    {"reason": "body_timeout", "limit": self.timeout_s}) from None
            if message["type"] != "http.request" or not message.get("more_body"):
                body_done = True
            return message

        async def tracked_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                if not body_done and _has_body(scope):
                    # answered before the body was read (too large, refused): the rest is
                    # never waited for, however slowly it comes
                    message["headers"] = [*message.get("headers", ()),
                                          (b"connection", b"close")]
            await send(message)

        await self.app(scope, timed_receive, tracked_send)
