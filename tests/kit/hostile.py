"""A hub that lies, as a thin wrapper around the real one: python-tuf's repository simulator
model, where the real repository code serves and the test rewrites what goes out. There is
no second hub here; every answer starts as the real hub application's answer.

    replica's HubClient ──► Hostile ──► the real hub's transport (tests/kit/inproc.py)
                              │  records every answer the hub gave (``served``)
                              └─ hooks rewrite an answer for one kind of request

Kinds (``kind_of``): head, changes, snapshot, batches, receipts, devices, epoch, proof,
blobs, other.

Hooks (each returns its ``Hook``; ``times``: how many answers it touches, None = all; hooks
on one kind compose, the first added sits nearest the hub):

    on_head(fn)             fn(doc) -> doc    the head document (signed fields, role, rules)
    on_json(kind, fn)       fn(doc) -> doc    any JSON answer (a receipt, devices)
    on_lines(kind, fn)      fn(lines) -> lines  an NDJSON stream (changes, snapshot), parsed;
                            return a line as bytes to send it raw (garbage, half a line)
    truncate(kind, lines=N | at_byte=N, fail=False)
                            the stream stops early; ``fail``: the connection breaks there
                            (a read error) instead of ending cleanly
    intercept(kind, fn)     fn(request, forward) -> Response  anything else: the hub commits
                            and the answer is lost (raise after ``forward()``), or an answer
                            recorded earlier is served again (``replay``: freeze, rollback)

Signing helpers, for a hub lying with its own key (compromised: ``InprocHub.hub.key.private``)
or with another key (an impostor): ``resign_head(doc, key, **fields)``, ``resign(obj, key,
domain)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from shared.canonical import dumps
from shared.signed import AUDIT_FIELDS, CHECKPOINT, HEAD_FIELDS, TREE, sign_head, sign_statement

KINDS = ("head", "changes", "snapshot", "batches", "receipts", "devices", "epoch", "proof",
         "blobs")
Forward = Callable[[], httpx2.Response]
Handler = Callable[[httpx2.Request, Forward], httpx2.Response]


def kind_of(request: httpx2.Request) -> str:
    parts = request.url.path.strip("/").split("/")
    if len(parts) >= 4 and parts[:2] == ["v1", "spaces"] and parts[3] in KINDS:
        return parts[3]
    return "other"


@dataclass
class Hook:
    kind: str
    handler: Handler
    times: int | None = None
    fired: int = 0

    @property
    def active(self) -> bool:
        return self.times is None or self.fired < self.times


@dataclass(frozen=True)
class Served:
    """One answer the real hub gave, as it gave it."""

    kind: str
    method: str
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def response(self) -> httpx2.Response:
        return httpx2.Response(self.status, headers=self.headers, content=self.body)

    def json(self) -> Any:
        return json.loads(self.body)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.body.split(b"\n") if x.strip()]


class _BrokenStream(httpx2.SyncByteStream):
    """Yields ``data``, then the connection breaks."""

    def __init__(self, data: bytes):
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        if self.data:
            yield self.data
        raise httpx2.RemoteProtocolError("peer closed connection mid-stream (hostile)")


@dataclass
class Hostile(httpx2.BaseTransport):
    inner: httpx2.BaseTransport
    hooks: list[Hook] = field(default_factory=list)
    served: list[Served] = field(default_factory=list)

    # ------------------------------------------------------------ transport

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        kind = kind_of(request)

        def forward() -> httpx2.Response:
            resp = self.inner.handle_request(request)
            body = resp.read()
            self.served.append(Served(kind, request.method, str(request.url),
                                      resp.status_code, list(resp.headers.items()), body))
            return httpx2.Response(resp.status_code, headers=resp.headers, content=body)

        call: Forward = forward
        for hook in self.hooks:
            if hook.kind == kind and hook.active:
                call = self._layer(hook, request, call)
        return call()

    @staticmethod
    def _layer(hook: Hook, request: httpx2.Request, inner: Forward) -> Forward:
        def run() -> httpx2.Response:
            hook.fired += 1
            return hook.handler(request, inner)
        return run

    def close(self) -> None:
        pass  # the real hub's transport outlives the clients that wrap it

    # ------------------------------------------------------------ hooks

    def intercept(self, kind: str, handler: Handler, times: int | None = None) -> Hook:
        assert kind in KINDS or kind == "other", kind
        hook = Hook(kind, handler, times)
        self.hooks.append(hook)
        return hook

    def remove(self, hook: Hook) -> None:
        self.hooks.remove(hook)

    def on_json(self, kind: str, fn: Callable[[Any], Any], times: int | None = None) -> Hook:
        def handler(request: httpx2.Request, forward: Forward) -> httpx2.Response:
            resp = forward()
            if resp.status_code >= 400:
                return resp
            return _json_response(resp, fn(resp.json()))
        return self.intercept(kind, handler, times)

    def on_head(self, fn: Callable[[dict[str, Any]], dict[str, Any]],
                times: int | None = None) -> Hook:
        return self.on_json("head", fn, times)

    def on_lines(self, kind: str, fn: Callable[[list[dict[str, Any]]], list[Any]],
                 times: int | None = None) -> Hook:
        def handler(request: httpx2.Request, forward: Forward) -> httpx2.Response:
            resp = forward()
            if resp.status_code >= 400:
                return resp
            lines = [json.loads(x) for x in resp.content.split(b"\n") if x.strip()]
            body = b"".join((x if isinstance(x, bytes) else dumps(x).encode()) + b"\n"
                            for x in fn(lines))
            return httpx2.Response(resp.status_code, headers=_body_headers(resp), content=body)
        return self.intercept(kind, handler, times)

    def truncate(self, kind: str, *, lines: int | None = None, at_byte: int | None = None,
                 fail: bool = False, times: int | None = None) -> Hook:
        assert (lines is None) != (at_byte is None), "give lines or at_byte"

        def handler(request: httpx2.Request, forward: Forward) -> httpx2.Response:
            resp = forward()
            body = resp.content
            if lines is not None:
                body = b"".join(body.splitlines(keepends=True)[:lines])
            else:
                body = body[:at_byte]
            headers = _body_headers(resp)
            if fail:
                return httpx2.Response(resp.status_code, headers=headers,
                                       stream=_BrokenStream(body))
            return httpx2.Response(resp.status_code, headers=headers, content=body)
        return self.intercept(kind, handler, times)

    def replay(self, answer: Served, times: int | None = None) -> Hook:
        """Serve ``answer`` (recorded earlier) instead of what the hub says now."""
        def handler(request: httpx2.Request, forward: Forward) -> httpx2.Response:
            return answer.response()
        return self.intercept(answer.kind, handler, times)

    def recorded(self, kind: str) -> list[Served]:
        return [s for s in self.served if s.kind == kind]


def _body_headers(resp: httpx2.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in resp.headers.items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")]


def _json_response(resp: httpx2.Response, doc: Any) -> httpx2.Response:
    return httpx2.Response(resp.status_code, headers=_body_headers(resp),
                           content=json.dumps(doc).encode())


def resign(obj: dict[str, Any], key: Any, domain: bytes) -> dict[str, Any]:
    """``obj`` (a signed statement) signed again by ``key`` under ``domain``."""
    body = {k: v for k, v in obj.items() if k != "signature"}
    return sign_statement(key, domain, body)


def resign_head(doc: dict[str, Any], key: Any, **fields: Any) -> dict[str, Any]:
    """A head document with ``fields`` changed and its signed part signed by ``key``; the
    unsigned context (name, role, rules) is kept."""
    body = {k: v for k, v in doc.items()
            if k in HEAD_FIELDS | AUDIT_FIELDS or k in ("nonce", CHECKPOINT, TREE)}
    body.update(fields)
    return dict(doc, **sign_head(key, body))
