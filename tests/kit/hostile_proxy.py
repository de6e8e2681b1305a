"""The hostile wrapper (tests/kit/hostile.py) as an HTTP proxy in front of a real
``quire hub serve`` process, for attacks on the real CLI (``quire sync``, ``quire join``)
and on the real watcher (``quire watch``, its event stream).

    quire (subprocess) ──HTTP──► HostileProxy (thread) ──Hostile──► hub process (loopback)
                                      │
                                      └─ GET …/events: relayed chunk by chunk as the hub
                                         writes it; ``event_hooks`` rewrite or add events

The hub is started with ``--public-url`` set to the proxy's URL, so the tokens and DPoP
proofs the CLI makes for the proxy are the hub's own. Answers other than event streams are
read whole before they are relayed (``Hostile`` rewrites them whole).

``target``: when set (a replica id), only requests that name that replica (the
``Quire-Replica`` header every pull and event stream carries) meet the hooks; every other
member talks to the honest hub through the same URL.

Event hooks (``on_event(fn)``): ``fn(event) -> [event | bytes, …]`` for each event of a
hooked stream, ``event`` = ``{"event", "id"?, "data"}`` with ``data`` parsed; return it
changed, drop it (``[]``), add fabricated events around it, or send raw ``bytes`` (a whole
SSE block, blank line included). Comments (keep-alives) and ``retry:`` pass untouched.
Hooks apply to every hooked stream, including one whose reader has gone but that has not
noticed yet (it does at its next write, a keep-alive at the latest): count on ``times``
only when one stream is open.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2

from shared.wire import REPLICA_HEADER
from tests.kit.cli import QUIRE, qjson
from tests.kit.host import REPO, free_port
from tests.kit.hostile import Hostile

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
        "content-encoding"}
EventFn = Callable[[dict[str, Any]], list[Any]]


@dataclass
class EventHook:
    fn: EventFn
    times: int | None = None  # events it touches (None: all)
    fired: int = 0


def parse_event(block: bytes) -> dict[str, Any] | None:
    """One SSE block as ``{"event", "id"?, "data"}``; None for comments and ``retry:``."""
    ev: dict[str, Any] = {}
    for line in block.decode("utf-8").split("\n"):
        if not line or line.startswith(":"):
            continue
        k, _, v = line.partition(":")
        v = v[1:] if v.startswith(" ") else v
        if k == "data":
            ev["data"] = json.loads(v)
        elif k in ("event", "id"):
            ev[k] = v
    return ev if "data" in ev else None


def render_event(ev: dict[str, Any]) -> bytes:
    out = [f"{k}: {ev[k]}" for k in ("id", "event") if k in ev]
    out.append("data: " + json.dumps(ev["data"], separators=(",", ":")))
    return ("\n".join(out) + "\n\n").encode()


class HostileProxy:
    def __init__(self) -> None:
        self.upstream = ""
        self.hostile = Hostile(inner=httpx2.HTTPTransport())
        self.plain = httpx2.HTTPTransport()  # honest answers (not the target, streams)
        self.target: str | None = None
        self.event_hooks: list[EventHook] = []
        self.events_seen: list[dict[str, Any]] = []  # hooked events as the hub sent them
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _relay(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP]
                req = httpx2.Request(self.command, proxy.upstream + self.path, headers=headers,
                                     content=body)
                hooked = proxy.target is None or self.headers.get(REPLICA_HEADER) == proxy.target
                if self.command == "GET" and self.path.split("?")[0].endswith("/events"):
                    self._relay_stream(req, hooked)
                    return
                try:
                    resp = (proxy.hostile if hooked else proxy.plain).handle_request(req)
                    data = resp.read()
                except Exception:  # noqa: BLE001 - a broken upstream is a cut connection
                    self.close_connection = True
                    return
                self._head(resp)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _head(self, resp: httpx2.Response) -> None:
                self.send_response(resp.status_code)
                for k, v in resp.headers.items():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)

            def _relay_stream(self, req: httpx2.Request, hooked: bool) -> None:
                """The event stream, chunk by chunk (chunked encoding), each complete event
                through the event hooks; ends when either side does."""
                self.close_connection = True
                try:
                    resp = proxy.plain.handle_request(req)
                except Exception:  # noqa: BLE001
                    return
                try:
                    self._head(resp)
                    if resp.status_code != 200:
                        data = resp.read()
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    buf = b""
                    for chunk in resp.iter_raw():
                        buf += chunk
                        while b"\n\n" in buf:
                            block, buf = buf.split(b"\n\n", 1)
                            out = proxy.rewrite(block + b"\n\n", hooked)
                            if out:
                                self.wfile.write(b"%x\r\n%s\r\n" % (len(out), out))
                                self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except Exception:  # noqa: BLE001 - the watcher or the hub hung up
                    pass
                finally:
                    resp.close()

            do_GET = do_POST = do_PUT = do_DELETE = _relay  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # ------------------------------------------------------------ event hooks

    def on_event(self, fn: EventFn, times: int | None = None) -> EventHook:
        hook = EventHook(fn, times)
        self.event_hooks.append(hook)
        return hook

    def on_head_event(self, fn: Callable[[dict[str, Any]], dict[str, Any]],
                      times: int | None = None) -> EventHook:
        """``fn(data) -> data`` for every head event (its signed head and ``changes``)."""
        return self.on_event(lambda ev: [dict(ev, data=fn(ev["data"]))
                                         if ev.get("event") == "head" else ev], times)

    def rewrite(self, block: bytes, hooked: bool) -> bytes:
        ev = parse_event(block) if hooked else None
        if ev is None:
            return block
        self.events_seen.append(ev)
        out: list[Any] = [json.loads(json.dumps(ev))]  # hooks get their own copy
        for hook in list(self.event_hooks):
            if hook.times is not None and hook.fired >= hook.times:
                continue
            hook.fired += 1
            out = [y for x in out for y in ([x] if isinstance(x, bytes) else hook.fn(x))]
        return b"".join(x if isinstance(x, bytes) else render_event(x) for x in out)

    def clear(self) -> None:
        """Every hook off: the proxy relays the hub's answers as they are."""
        self.hostile.hooks.clear()
        self.event_hooks.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def proxied_hub(data: Path, env: dict[str, str] | None = None
                ) -> Iterator[tuple[HostileProxy, str]]:
    """A ``quire hub serve`` process whose public URL is a ``HostileProxy``'s; yields the
    proxy and the hub's enrollment code."""
    proxy = HostileProxy()
    init = qjson(None, "hub", "init", "--data", str(data), "--public-url", proxy.url)
    port = free_port()
    log = open(data / "serve.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([*QUIRE, "hub", "serve", "--data", str(data), "--host",
                             "127.0.0.1", "--port", str(port), "--public-url", proxy.url],
                            stdout=log, stderr=log, cwd=REPO, env={**os.environ, **(env or {})})
    try:
        proxy.upstream = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(proxy.upstream + "/healthz").status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "hub did not start"
            time.sleep(0.1)
        yield proxy, init["enrollment_code"]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        proxy.close()
