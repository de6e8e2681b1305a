"""The hostile wrapper (tests/replica/hostile.py) as an HTTP proxy in front of a real
``quire hub serve`` process, for attacks on the real CLI (``quire sync``, ``quire join``).

    quire (subprocess) ──HTTP──► HostileProxy (thread) ──Hostile──► hub process (loopback)

The hub is started with ``--public-url`` set to the proxy's URL, so the tokens and DPoP
proofs the CLI makes for the proxy are the hub's own. Streams are read whole before they are
relayed (the CLI's sync and join never open the event stream).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2

from tests.replica.hostile import Hostile

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
        "content-encoding"}


class HostileProxy:
    def __init__(self) -> None:
        self.upstream = ""
        self.hostile = Hostile(inner=httpx2.HTTPTransport())
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
                try:
                    resp = proxy.hostile.handle_request(req)
                    data = resp.read()
                except Exception:  # noqa: BLE001 - a broken upstream is a cut connection
                    self.close_connection = True
                    return
                self.send_response(resp.status_code)
                for k, v in resp.headers.items():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _relay  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
